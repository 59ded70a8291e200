import { describe, expect, it } from "vitest";
import { diffConfig } from "./config-diff.js";
import { diffFields, renderDiff } from "./field-diff.js";

describe("diffFields", () => {
  it.each([
    ["equal documents", { a: 1, b: [1, 2] }, { a: 1, b: [1, 2] }, []],
    [
      "a changed leaf",
      { match: { pathPrefix: "/a" } },
      { match: { pathPrefix: "/b" } },
      [{ op: "changed", path: "match.pathPrefix", before: "/a", after: "/b" }],
    ],
    [
      "an added and a removed field",
      { a: 1 },
      { b: 2 },
      [
        { op: "removed", path: "a", before: 1 },
        { op: "added", path: "b", after: 2 },
      ],
    ],
    [
      "array items by index, numerically",
      { n: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10] },
      { n: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12] },
      [
        { op: "changed", path: "n.10", before: 10, after: 11 },
        { op: "added", path: "n.11", after: 12 },
      ],
    ],
    [
      "an empty container filled",
      { set: {} },
      { set: { "x-a": "1" } },
      [
        { op: "removed", path: "set", before: {} },
        { op: "added", path: "set.x-a", after: "1" },
      ],
    ],
    [
      "an empty array is not an empty object",
      { a: [] },
      { a: {} },
      [{ op: "changed", path: "a", before: [], after: {} }],
    ],
  ])("%s", (_name, before, after, expected) => {
    expect(diffFields(before, after)).toEqual(expected);
  });
});

describe("diffConfig", () => {
  const upstream = { nodes: [{ address: "127.0.0.1:9001", weight: 1 }] };

  it("shows no difference for a manifest that leaves out fields the store holds as defaults", () => {
    const stored = diffConfig([{ kind: "upstream", name: "a", spec: upstream }], new Map(), false);
    expect(stored.ok).toBe(true);
    // What the store would hold: the manifest's document with every default filled.
    const filled = stored.ok ? stored.diffs[0]?.fields : [];
    const document: Record<string, unknown> = {};
    for (const field of filled ?? [])
      if (field.op === "added") setPath(document, field.path, field.after);
    const again = diffConfig(
      [{ kind: "upstreams", name: "a", spec: upstream }],
      new Map([["upstreams", new Map([["a", document]])]]),
      false,
    );
    expect(again).toEqual({ ok: true, diffs: [] });
  });

  it("lists created, changed and (with prune) deleted resources", () => {
    const current = new Map([
      [
        "upstreams",
        new Map([
          ["a", upstream],
          ["old", upstream],
        ]),
      ],
    ]) as Parameters<typeof diffConfig>[1];
    const manifest = [
      { kind: "upstream", name: "a", spec: { nodes: [{ address: "127.0.0.1:9002" }] } },
      { kind: "breaker", name: "b", spec: {} },
    ];
    const result = diffConfig(manifest, current, true);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.diffs.map((d) => [d.action, `${d.kind}/${d.name}`])).toEqual([
      ["change", "upstreams/a"],
      ["delete", "upstreams/old"],
      ["create", "breakers/b"],
    ]);
    expect(result.diffs[0]?.fields).toEqual([
      { op: "changed", path: "nodes.0.address", before: "127.0.0.1:9001", after: "127.0.0.1:9002" },
    ]);
    // Without prune, what the manifest does not name is left alone.
    const kept = diffConfig(manifest, current, false);
    expect(kept.ok && kept.diffs.map((d) => d.name)).toEqual(["a", "b"]);
  });

  it("names each bad field of the manifest instead of diffing it", () => {
    const result = diffConfig(
      [
        { kind: "upstream", name: "a", spec: { nodes: [{ address: "nowhere", weight: 0 }] } },
        { kind: "gadget", name: "g", spec: {} },
      ],
      new Map(),
      false,
    );
    expect(result.ok).toBe(false);
    const text = result.ok ? "" : result.problems.join("\n");
    expect(text).toContain("upstreams/a nodes.0.address");
    expect(text).toContain("upstreams/a nodes.0.weight");
    expect(text).toContain("unknown kind gadget");
  });
});

describe("renderDiff", () => {
  const diffs = [
    {
      kind: "routes",
      name: "api",
      action: "change" as const,
      fields: [{ op: "changed" as const, path: "match.pathPrefix", before: "/a", after: "/b" }],
    },
  ];

  it("prints one line per resource and per field, without colour off a terminal", () => {
    expect(renderDiff(diffs, false)).toBe('~ routes/api\n    ~ match.pathPrefix: "/a" -> "/b"\n');
  });

  it("colours lines on a terminal", () => {
    expect(renderDiff(diffs, true)).toContain("\u001b[33m~ routes/api\u001b[0m");
  });
});

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split(".");
  let node: Record<string, unknown> = target;
  keys.forEach((key, index) => {
    if (index === keys.length - 1) {
      node[key] = value;
      return;
    }
    const next = keys[index + 1] as string;
    node[key] ??= /^\d+$/.test(next) ? [] : {};
    node = node[key] as Record<string, unknown>;
  });
}
