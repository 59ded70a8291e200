import { describe, expect, it } from "vitest";
import { LayeredMap } from "./layered-map.js";

/** What a list of [name, value] becomes after a change, as a control plane's whole snapshot. */
function patched(
  list: readonly (readonly [string, number])[],
  set: readonly (readonly [string, number])[],
  removed: readonly string[],
): [string, number][] {
  const byName = new Map(set);
  const result: [string, number][] = [];
  for (const [key, value] of list) {
    if (removed.includes(key)) continue;
    result.push([key, byName.get(key) ?? value]);
    byName.delete(key);
  }
  return [...result, ...byName];
}

describe("LayeredMap", () => {
  it.each([
    ["replaces a key in its place", [["b", 20]], [], "a1 b20 c3"],
    ["adds a new key after the rest", [["d", 4]], [], "a1 b2 c3 d4"],
    ["removes a key", [], ["b"], "a1 c3"],
    ["ignores the removal of a key it does not hold", [], ["zz"], "a1 b2 c3"],
  ] as const)("%s", (_, set, removed, expected) => {
    const base = LayeredMap.over(
      new Map([
        ["a", 1],
        ["b", 2],
        ["c", 3],
      ]),
    );
    const next = base.with(set, removed);
    expect([...next].map(([k, v]) => `${k}${v}`).join(" ")).toBe(expected);
    expect(next.size).toBe(expected.split(" ").length);
    // The map it came from is unchanged.
    expect([...base].map(([k, v]) => `${k}${v}`).join(" ")).toBe("a1 b2 c3");
  });

  it("lists a key removed and added again after the rest, as a whole snapshot would", () => {
    const base = LayeredMap.over(
      new Map([
        ["a", 1],
        ["b", 2],
        ["c", 3],
      ]),
    );
    const gone = base.with([], ["a"]);
    expect(gone.has("a")).toBe(false);
    expect(gone.get("a")).toBeUndefined();
    const back = gone.with([["a", 9]]);
    expect([...back.keys()]).toEqual(["b", "c", "a"]);
    expect(back.get("a")).toBe(9);
    expect(gone.has("a")).toBe(false);
  });

  it("matches the whole list through 500 changes and the folds they cause, each version kept", () => {
    let list: [string, number][] = Array.from({ length: 100 }, (_, i) => [`k${i}`, i]);
    let map = LayeredMap.over(new Map(list));
    const versions: { map: LayeredMap<string, number>; list: [string, number][] }[] = [];
    for (let change = 1; change <= 500; change++) {
      const set: [string, number][] = [[`k${(change * 7) % 130}`, 1_000 + change]];
      const removed = change % 3 === 0 ? [`k${(change * 11) % 130}`] : [];
      // A key cannot be both set and removed in one delta.
      const cleanRemoved = removed.filter((key) => key !== set[0]![0]);
      map = map.with(set, cleanRemoved);
      list = patched(list, set, cleanRemoved);
      expect([...map]).toEqual(list);
      expect(map.size).toBe(list.length);
      versions.push({ map, list });
    }
    // Every older map still answers as it did: a request holding it sees its own version.
    for (const { map: old, list: oldList } of versions.filter((_, i) => i % 50 === 0)) {
      expect([...old.entries()]).toEqual(oldList);
      for (const [key, value] of oldList) expect(old.get(key)).toBe(value);
    }
  });

  it("offers no way to write it", () => {
    const map = LayeredMap.over(new Map([["a", 1]])) as unknown as Map<string, number>;
    expect(map.set).toBeUndefined();
    expect(map.delete).toBeUndefined();
    expect(Object.isFrozen(map)).toBe(true);
  });
});
