import { describe, expect, it } from "vitest";
import { InFlightList } from "./in-flight-list.js";

interface Item {
  name: string;
}

function listOf(...names: string[]): { list: InFlightList<Item>; items: Map<string, Item> } {
  const list = new InFlightList<Item>();
  const items = new Map(names.map((name) => [name, { name }]));
  for (const item of items.values()) list.add(item);
  return { list, items };
}

const names = (list: InFlightList<Item>) => [...list].map((item) => item.name);

describe("InFlightList", () => {
  it.each([
    { remove: ["a"], left: ["b", "c"] },
    { remove: ["b"], left: ["a", "c"] },
    { remove: ["c"], left: ["a", "b"] },
    { remove: ["a", "c"], left: ["b"] },
    { remove: ["b", "a", "c"], left: [] },
  ])("keeps the others in order after removing $remove", ({ remove, left }) => {
    const { list, items } = listOf("a", "b", "c");
    for (const name of remove) list.delete(items.get(name)!);
    expect(names(list)).toEqual(left);
    expect(list.size).toBe(left.length);
  });

  it("ignores adding an item twice and deleting one that is not listed", () => {
    const { list, items } = listOf("a", "b");
    list.add(items.get("a")!);
    list.delete({ name: "stranger" });
    list.delete(items.get("b")!);
    list.delete(items.get("b")!);
    expect(names(list)).toEqual(["a"]);
    expect(list.size).toBe(1);
  });

  it("takes an item back after it left, at the end", () => {
    const { list, items } = listOf("a", "b");
    list.delete(items.get("a")!);
    list.add(items.get("a")!);
    expect(names(list)).toEqual(["b", "a"]);
  });

  it("lets the iteration delete the item it is at", () => {
    const { list } = listOf("a", "b", "c");
    const seen: string[] = [];
    for (const item of list) {
      seen.push(item.name);
      list.delete(item);
    }
    expect(seen).toEqual(["a", "b", "c"]);
    expect(list.size).toBe(0);
  });

  it("leaves no link to the list on an item that left, nor from its neighbours to it", () => {
    const { list, items } = listOf("a", "b", "c");
    const b = items.get("b")!;
    list.delete(b);
    // What the collector sees: an item that left references nothing of the list, so a
    // response promoted to the old generation cannot keep later responses alive.
    for (const key of Object.getOwnPropertySymbols(b)) {
      const value = (b as unknown as Record<symbol, unknown>)[key];
      expect(typeof value === "object" && value !== null).toBe(false);
    }
    for (const other of [items.get("a")!, items.get("c")!]) {
      for (const key of Object.getOwnPropertySymbols(other)) {
        expect((other as unknown as Record<symbol, unknown>)[key]).not.toBe(b);
      }
    }
  });
});
