import { describe, expect, it } from "vitest";
import { mergeNodes } from "./merge-nodes.js";
import type { RegisteredNode } from "./registered-node.js";

function registered(id: string, address: string, weight = 1): RegisteredNode {
  return {
    upstream: "agents",
    id,
    address,
    weight,
    ttlSeconds: 10,
    registeredAt: "2025-01-01T00:00:00.000Z",
    revision: 1,
  };
}

describe("mergeNodes", () => {
  it.each([
    {
      name: "document nodes first, then registered in the order given (by id)",
      config: [{ address: "a:1", weight: 3 }],
      nodes: [registered("n1", "b:1"), registered("n2", "c:1", 5)],
      want: ["a:1*3:config", "b:1*1:registry:n1", "c:1*5:registry:n2"],
      shadowed: [],
    },
    {
      name: "the document wins an address clash, whatever the registered weight",
      config: [{ address: "a:1", weight: 3 }],
      nodes: [registered("n1", "a:1", 9)],
      want: ["a:1*3:config"],
      shadowed: ["n1"],
    },
    {
      name: "host names compare without case",
      config: [{ address: "Agents.internal:80", weight: 1 }],
      nodes: [registered("n1", "agents.INTERNAL:80")],
      want: ["Agents.internal:80*1:config"],
      shadowed: ["n1"],
    },
    {
      name: "of two registrations of one address the first (lower id) wins",
      config: [],
      nodes: [registered("a", "x:1", 2), registered("b", "x:1", 7)],
      want: ["x:1*2:registry:a"],
      shadowed: ["b"],
    },
  ])("$name", ({ config, nodes, want, shadowed }) => {
    const merged = mergeNodes(config, nodes);
    expect(
      merged.nodes.map(
        (n) => `${n.address}*${n.weight}:${n.source}${n.id === undefined ? "" : `:${n.id}`}`,
      ),
    ).toEqual(want);
    expect(merged.shadowed.map((n) => n.id)).toEqual(shadowed);
  });
});
