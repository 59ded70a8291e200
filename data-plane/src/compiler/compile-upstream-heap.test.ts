import { expect, it } from "vitest";
import { upstreamAt } from "../testing/delta-fixture.js";
import { settledHeap } from "../testing/settled-heap.js";
import { compileUpstream } from "./compile-upstream.js";

const UPSTREAMS = 200;
const NODES_EACH = 100;

/**
 * Issue 9: every object a compiled node keeps survives boot's scavenges and is copied by them,
 * 20,000 times at full config. A node's `origin` is the scheme's constant before the address
 * the snapshot already holds; built from its parts it was a chain of three concatenated
 * strings and a copy of "http://" per node: 250 bytes a node with its share of the upstream,
 * now about 150.
 */
it("keeps a compiled node, with its share of the upstream, in under 200 bytes", async () => {
  // The decoded messages are made before the first reading: the data plane holds them anyway.
  const upstreams = Array.from({ length: UPSTREAMS }, (_, i) => upstreamAt(i, NODES_EACH));
  const before = await settledHeap();
  const compiled = upstreams.map((upstream) => compileUpstream(upstream, new Map()));
  const perNode = ((await settledHeap()) - before) / (UPSTREAMS * NODES_EACH);
  const node = compiled[7]!.nodes[42]!;
  expect(node.origin).toBe("http://127.1.7.43:80");
  expect(perNode).toBeLessThan(200);
});
