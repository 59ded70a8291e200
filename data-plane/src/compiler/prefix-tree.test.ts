import { describe, expect, it } from "vitest";
import { PrefixTree } from "./prefix-tree.js";

// The longest prefix of `path` that holds, as the route table asks for it.
const longest = (tree: PrefixTree<string>, path: string) =>
  tree.find(path, (value) => value, undefined, undefined);

describe("prefix tree over path segments", () => {
  // "s13818" and "s136662" share a 30-bit FNV-1a hash, so they sit in one chain under /svc:
  // a lookup must compare the segment itself, not trust the hash.
  const colliding = ["/svc/s13818", "/svc/s136662"] as const;

  it("tells apart segments whose hashes collide", () => {
    const tree = PrefixTree.build([
      ["/svc", "svc"],
      [colliding[0], "first"],
      [colliding[1], "second"],
    ]);
    expect(longest(tree, "/svc/s13818/x")).toBe("first");
    expect(longest(tree, "/svc/s136662")).toBe("second");
    expect(longest(tree, "/svc/s136663")).toBe("svc");
    expect(tree.get(colliding[1])).toBe("second");
    expect([...tree.values()].sort()).toEqual(["first", "second", "svc"]);
  });

  it("changes one of two colliding segments in a copy and leaves the original alone", () => {
    const before = PrefixTree.build([
      [colliding[0], "first"],
      [colliding[1], "second"],
    ]);
    for (const changed of colliding) {
      const after = before.with(changed, "new").with(`${changed}/deeper`, "deeper");
      expect(after.get(changed)).toBe("new");
      expect(longest(after, `${changed}/deeper/x`)).toBe("deeper");
      expect(before.get(changed)).toBe(changed === colliding[0] ? "first" : "second");
      expect(longest(before, `${changed}/deeper/x`)).toBe(before.get(changed));
      const other = colliding.find((path) => path !== changed)!;
      expect(after.get(other)).toBe(before.get(other));
      const removed = after.with(changed, undefined);
      expect(removed.get(changed)).toBeUndefined();
      expect(longest(removed, changed)).toBeUndefined();
      expect(removed.size).toBe(2);
    }
  });

  it("grows a node's only child into several in a copy, leaving the original with one", () => {
    const one = PrefixTree.build([["/a/b", "b"]]);
    const two = one.with("/a/c", "c").with("/a/b/d", "d");
    expect(longest(two, "/a/c/x")).toBe("c");
    expect(longest(two, "/a/b/d")).toBe("d");
    expect(longest(two, "/a/b/e")).toBe("b");
    expect(longest(one, "/a/c/x")).toBeUndefined();
    expect(longest(one, "/a/b/d")).toBe("b");
    expect([...one.values()]).toEqual(["b"]);
    expect([...two.values()].sort()).toEqual(["b", "c", "d"]);
  });

  it("keeps a prefix ending in / apart from the same prefix without it", () => {
    const tree = PrefixTree.build([
      ["/", "root"],
      ["/a", "a"],
      ["/a/", "a-dir"],
      ["/a//", "a-empty-dir"],
    ]);
    expect(tree.get("/a")).toBe("a");
    expect(tree.get("/a/")).toBe("a-dir");
    expect(tree.get("/a//")).toBe("a-empty-dir");
    expect(tree.get("/a///")).toBeUndefined();
    expect(longest(tree, "/a")).toBe("a");
    expect(longest(tree, "/a/")).toBe("a-dir");
    expect(longest(tree, "/a/b")).toBe("a-dir");
    expect(longest(tree, "/a//b")).toBe("a-empty-dir");
    expect(longest(tree, "/ab")).toBe("root");
    expect(longest(tree, "")).toBeUndefined();
    expect(longest(tree, "a")).toBeUndefined();
    expect(tree.size).toBe(4);
  });

  it("refuses a prefix that does not start with /, naming it", () => {
    expect(() => PrefixTree.build([["api", 1]])).toThrow('prefix "api" does not start with "/"');
    expect(PrefixTree.build<number>([]).get("api")).toBeUndefined();
  });
});
