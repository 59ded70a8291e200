/**
 * The requests a server is answering now, kept as a doubly linked list threaded through the
 * items themselves, for a drain that must reach each of them (HttpDrain).
 *
 * Why not a Set: a Set that takes and drops an item per request outgrows its hash table every
 * few dozen requests, and V8 then moves the entries to a new table and leaves a pointer from
 * the old table to the new one (for iterators still walking it). Once a collection promotes one
 * of those tables to the old generation (a full collection does so with whatever is live), the
 * dead old table keeps its successor alive through every scavenge, that one the next, and each
 * table the responses it held: every request's response, request and headers then outlive two
 * scavenges and are promoted, about 1.7 MiB per scavenge in the proxy under load, until the next
 * full collection, which starts the chain again. The old generation grows, collections get
 * longer, and resident memory climbs. A list through the items allocates nothing, and an item
 * that leaves keeps no link to the list nor the list to it.
 */
const kPrev = Symbol("clawgate.inFlight.prev");
const kNext = Symbol("clawgate.inFlight.next");
const kListed = Symbol("clawgate.inFlight.listed");

/** What the list threads through: any object it may add its three link fields to. */
export type Linkable = object;

interface Linked {
  [kPrev]: Linked | undefined;
  [kNext]: Linked | undefined;
  [kListed]: boolean;
}

export class InFlightList<T extends Linkable> {
  #head: Linked | undefined = undefined;
  #tail: Linked | undefined = undefined;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Appends `item`; a no-op when it is listed already. */
  add(item: T): void {
    const linked = item as unknown as Linked;
    if (linked[kListed] === true) return;
    linked[kListed] = true;
    linked[kNext] = undefined;
    linked[kPrev] = this.#tail;
    if (this.#tail === undefined) this.#head = linked;
    else this.#tail[kNext] = linked;
    this.#tail = linked;
    this.#size++;
  }

  /** Takes `item` out and clears its links; a no-op when it is not listed. */
  delete(item: T): void {
    const linked = item as unknown as Linked;
    if (linked[kListed] !== true) return;
    const prev = linked[kPrev];
    const next = linked[kNext];
    if (prev === undefined) this.#head = next;
    else prev[kNext] = next;
    if (next === undefined) this.#tail = prev;
    else next[kPrev] = prev;
    linked[kPrev] = undefined;
    linked[kNext] = undefined;
    linked[kListed] = false;
    this.#size--;
  }

  /** The items in the order they were added; deleting the current one while iterating is safe. */
  *[Symbol.iterator](): IterableIterator<T> {
    let linked = this.#head;
    while (linked !== undefined) {
      const next = linked[kNext];
      yield linked as unknown as T;
      linked = next;
    }
  }
}
