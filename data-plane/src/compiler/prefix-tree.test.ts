import { describe, expect, it } from "vitest";
import { PrefixTree } from "./prefix-tree.js";

// The longest prefix of `path` that holds, as the route table asks for it.
const longest = (tree: PrefixTree<string>, path: string) =>
  tree.find(path, (value) => value, undefined, undefined);

describe("prefix tree over path segments", () => {
  // "s13818" and "s136662" share a 30-bit FNV-1a hash, so they sit in one chain under /svc:
  // a lookup must compare the segment itself, not trust the hash.
  const colliding = ["/svc/s13818", "/svc/s136662"] as const;

  it("builds in steps of `every` keys in each pass: gathering, sizing the table, filling it", () => {
    // Before, sizing the table was one pass over every key without a pause, and the fill
    // ended by moving every node into a table of the right size in the same step.
    const prefixes = Array.from(
      { length: 300 },
      (_, i) => [`/api/v${i % 3}/s-${i}`, `p${i}`] as const,
    );
    const exact = Array.from({ length: 300 }, (_, i) => [`/exact/${i}/status/`, `e${i}`] as const);
    const steps = PrefixTree.buildSteps(prefixes, exact, 1);
    let pauses = 0;
    let step = steps.next();
    for (; !step.done; step = steps.next()) pauses++;
    expect(pauses).toBeGreaterThanOrEqual(3 * 600);
    const tree = step.value;
    expect(longest(tree, "/api/v2/s-299/items")).toBe("p299");
    expect(tree.getExact("/exact/7/status/")).toBe("e7");
    expect(tree.getExact("/exact/7/status")).toBeUndefined();
    expect(tree.size + tree.exactSize).toBe(600);
  });

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

describe("exact paths in the prefix tree", () => {
  const tree = PrefixTree.build(
    [
      ["/", "root-prefix"],
      ["/a", "a-prefix"],
      ["/a/", "a-dir-prefix"],
    ],
    [
      ["/", "root-exact"],
      ["/a", "a-exact"],
      ["/a/", "a-dir-exact"],
      ["/a/b/c", "abc-exact"],
    ],
  );
  // Every value that holds for `path`, in the order a match tries them.
  const all = (path: string) => {
    const seen: string[] = [];
    tree.find(path, (value) => void seen.push(value), undefined, undefined);
    return seen;
  };

  it("tries the exact path first, then prefixes from the longest", () => {
    expect(all("/a")).toEqual(["a-exact", "a-prefix", "root-prefix"]);
    expect(all("/a/")).toEqual([
      "a-dir-exact",
      "a-exact",
      "a-dir-prefix",
      "a-prefix",
      "root-prefix",
    ]);
    expect(all("/")).toEqual(["root-exact", "root-prefix"]);
    expect(all("/a/b/c")).toEqual(["abc-exact", "a-dir-prefix", "a-prefix", "root-prefix"]);
  });

  it("holds an exact path only for the whole request path, or it with one more slash", () => {
    expect(all("/a/b")).toEqual(["a-dir-prefix", "a-prefix", "root-prefix"]);
    expect(all("/a/b/c/")).toEqual(["abc-exact", "a-dir-prefix", "a-prefix", "root-prefix"]);
    expect(all("/a/b/c/d")).toEqual(["a-dir-prefix", "a-prefix", "root-prefix"]);
    expect(all("/ab")).toEqual(["root-prefix"]);
  });

  it("keeps exact paths and prefixes apart in get, sizes and changes", () => {
    expect(tree.getExact("/a")).toBe("a-exact");
    expect(tree.get("/a")).toBe("a-prefix");
    expect(tree.getExact("/a/b")).toBeUndefined();
    expect([tree.size, tree.exactSize]).toEqual([3, 4]);
    const changed = tree.withAll([
      { kind: "exact", path: "/a", value: undefined },
      { kind: "exact", path: "/a/b", value: "ab-exact" },
      { kind: "prefix", path: "/a/b/c", value: "abc-prefix" },
    ]);
    expect(changed.getExact("/a")).toBeUndefined();
    expect(changed.get("/a")).toBe("a-prefix");
    expect([changed.size, changed.exactSize]).toEqual([4, 4]);
    expect(all("/a")).toEqual(["a-exact", "a-prefix", "root-prefix"]);
    const seen: string[] = [];
    changed.find("/a/b/c", (value) => void seen.push(value), undefined, undefined);
    expect(seen).toEqual(["abc-exact", "abc-prefix", "a-dir-prefix", "a-prefix", "root-prefix"]);
  });

  it("counts the keys changed since it was built", () => {
    expect(tree.changes).toBe(0);
    const once = tree.withAll([
      { kind: "exact", path: "/a", value: undefined },
      { kind: "prefix", path: "/z", value: "z" },
    ]);
    expect(once.changes).toBe(2);
    expect(once.with("/z", undefined).changes).toBe(3);
  });

  it("answers itself when asked to remove what it does not hold", () => {
    expect(tree.withAll([{ kind: "exact", path: "/nothing/here", value: undefined }])).toBe(tree);
  });
});

describe("a prefix tree grown by changes", () => {
  it("finds every path added after it outgrew its table, and the original still its own", () => {
    const small = PrefixTree.build([["/keep", "keep"]]);
    const changes = Array.from({ length: 2_000 }, (_, i) => ({
      kind: (i % 2 === 0 ? "prefix" : "exact") as "prefix" | "exact",
      path: `/g/${i % 7}/n${i}`,
      value: `v${i}`,
    }));
    const big = small.withAll(changes);
    for (const [i, change] of changes.entries()) {
      const found = longest(big, change.kind === "prefix" ? `${change.path}/more` : change.path);
      expect(found).toBe(`v${i}`);
    }
    expect(longest(big, "/keep/x")).toBe("keep");
    expect([big.size, big.exactSize]).toEqual([1_001, 1_000]);
    expect(longest(small, "/g/0/n0")).toBeUndefined();
    expect([...small.values()]).toEqual(["keep"]);
  });
});

describe("copies of a tree of many pages", () => {
  it("share what they do not change, and never see each other's changes", () => {
    const paths = Array.from({ length: 3_000 }, (_, i): [string, string] => [`/p/${i}`, `v${i}`]);
    const original = PrefixTree.build(paths);
    const one = original.withAll([
      { kind: "prefix", path: "/p/7", value: "one" },
      { kind: "prefix", path: "/q/new", value: "one-new" },
    ]);
    const two = original.withAll([
      { kind: "prefix", path: "/p/7", value: "two" },
      { kind: "exact", path: "/p/8", value: "two-exact" },
    ]);
    expect([longest(original, "/p/7/x"), longest(one, "/p/7/x"), longest(two, "/p/7/x")]).toEqual([
      "v7",
      "one",
      "two",
    ]);
    expect([longest(original, "/q/new"), longest(one, "/q/new"), longest(two, "/q/new")]).toEqual([
      undefined,
      "one-new",
      undefined,
    ]);
    expect([original.getExact("/p/8"), one.getExact("/p/8"), two.getExact("/p/8")]).toEqual([
      undefined,
      undefined,
      "two-exact",
    ]);
    for (const i of [0, 511, 512, 1_999, 2_999]) {
      for (const tree of [original, one, two]) expect(longest(tree, `/p/${i}`)).toBe(`v${i}`);
    }
  });
});
