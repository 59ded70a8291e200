import { describe, expect, it } from "vitest";
import { DueHeap, type DueItem } from "./due-heap.js";

interface Item extends DueItem {
  name: string;
}

function item(name: string): Item {
  return { name, dueAt: 0, heapIndex: -1 };
}

/** Pops everything due by `now`, in order. */
function drain(heap: DueHeap<Item>, now = Number.POSITIVE_INFINITY): string[] {
  const out: string[] = [];
  for (let next = heap.popDue(now); next !== undefined; next = heap.popDue(now)) {
    out.push(next.name);
  }
  return out;
}

describe("DueHeap", () => {
  it("pops items earliest first and only once due", () => {
    const heap = new DueHeap<Item>();
    const due = [50, 10, 40, 30, 20, 60];
    for (const [i, at] of due.entries()) heap.set(item(`n${i}`), at);
    expect(heap.peek()?.name).toBe("n1");
    expect(drain(heap, 35)).toEqual(["n1", "n4", "n3"]);
    expect(heap.size).toBe(3);
    expect(drain(heap)).toEqual(["n2", "n0", "n5"]);
    expect(heap.popDue(1_000)).toBeUndefined();
  });

  it("moves an item already in when set again, and deletes any item", () => {
    const heap = new DueHeap<Item>();
    const items = Array.from({ length: 8 }, (_, i) => item(`n${i}`));
    for (const [i, it] of items.entries()) heap.set(it, i * 10);
    heap.set(items[7]!, 5); // earlier
    heap.set(items[0]!, 100); // later
    heap.delete(items[3]!);
    heap.delete(items[3]!); // a no-op the second time
    expect(items[3]!.heapIndex).toBe(-1);
    expect(drain(heap)).toEqual(["n7", "n1", "n2", "n4", "n5", "n6", "n0"]);
    expect(items.every((it) => it.heapIndex === -1)).toBe(true);
  });

  it("keeps order through many random moves and deletions", () => {
    const heap = new DueHeap<Item>();
    const items = Array.from({ length: 500 }, (_, i) => item(`n${i}`));
    let seed = 7;
    const next = () => {
      seed = (seed * 48_271) % 2_147_483_647;
      return seed;
    };
    for (const it of items) heap.set(it, next() % 10_000);
    for (let k = 0; k < 2_000; k++) {
      const it = items[next() % items.length]!;
      if (k % 3 === 0) heap.delete(it);
      else heap.set(it, next() % 10_000);
    }
    const kept = items.filter((it) => it.heapIndex >= 0);
    const popped: number[] = [];
    for (let it = heap.popDue(Infinity); it !== undefined; it = heap.popDue(Infinity)) {
      popped.push(it.dueAt);
    }
    expect(popped).toHaveLength(kept.length);
    expect(popped).toEqual([...popped].sort((a, b) => a - b));
  });
});
