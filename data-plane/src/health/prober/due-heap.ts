/** What the heap orders: a due time, and the slot the heap keeps for O(log n) removal. */
export interface DueItem {
  /** When the item is due, on the scheduler's clock. */
  dueAt: number;
  /** The item's index in the heap, -1 while it is not in it; only `DueHeap` writes it. */
  heapIndex: number;
}

/**
 * A binary min-heap on `dueAt` whose items know their own index, so one can be moved or removed
 * in O(log n) without a search. The probe scheduler keeps every node's next probe here and arms
 * one timer for the earliest, instead of one timer per node: 20,000 nodes are then 20,000 array
 * slots, and a tick touches only the probes that are due.
 */
export class DueHeap<T extends DueItem> {
  readonly #items: T[] = [];

  get size(): number {
    return this.#items.length;
  }

  /** The earliest item, or undefined when empty. */
  peek(): T | undefined {
    return this.#items[0];
  }

  /** Puts the item in at `dueAt`, or moves it there when it is already in. */
  set(item: T, dueAt: number): void {
    item.dueAt = dueAt;
    if (item.heapIndex < 0) {
      item.heapIndex = this.#items.length;
      this.#items.push(item);
    }
    this.#fix(item.heapIndex);
  }

  /** Takes the item out; a no-op when it is not in. */
  delete(item: T): void {
    const at = item.heapIndex;
    if (at < 0) return;
    item.heapIndex = -1;
    const last = this.#items.pop()!;
    if (at === this.#items.length) return;
    this.#items[at] = last;
    last.heapIndex = at;
    this.#fix(at);
  }

  /** Takes out and returns the earliest item if it is due at `now`, else undefined. */
  popDue(now: number): T | undefined {
    const first = this.#items[0];
    if (first === undefined || first.dueAt > now) return undefined;
    this.delete(first);
    return first;
  }

  clear(): void {
    for (const item of this.#items) item.heapIndex = -1;
    this.#items.length = 0;
  }

  #fix(at: number): void {
    if (!this.#up(at)) this.#down(at);
  }

  /** Moves the item at `at` towards the root while it is earlier than its parent. */
  #up(at: number): boolean {
    const items = this.#items;
    const item = items[at]!;
    let moved = false;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = items[parentAt]!;
      if (parent.dueAt <= item.dueAt) break;
      items[at] = parent;
      parent.heapIndex = at;
      at = parentAt;
      moved = true;
    }
    items[at] = item;
    item.heapIndex = at;
    return moved;
  }

  #down(at: number): void {
    const items = this.#items;
    const item = items[at]!;
    const length = items.length;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= length) break;
      const right = left + 1;
      const child = right < length && items[right]!.dueAt < items[left]!.dueAt ? right : left;
      const earliest = items[child]!;
      if (earliest.dueAt >= item.dueAt) break;
      items[at] = earliest;
      earliest.heapIndex = at;
      at = child;
    }
    items[at] = item;
    item.heapIndex = at;
  }
}
