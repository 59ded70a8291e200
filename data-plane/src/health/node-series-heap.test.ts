import { expect, it } from "vitest";
import { settledHeap } from "../testing/settled-heap.js";
import { NodeSeries } from "./node-series.js";

const NODES = 20_000;

/**
 * Issue 9: at 20,000 nodes each byte kept per node is 20 KB of heap the collector walks in the
 * seconds after boot. The two series of a node are its counts, rendered at scrape; kept as
 * finished lines they took about 500 bytes a node (labels, healthy and failures lines, each a
 * chain of concatenated strings); as counts, about 100.
 */
it("keeps each node's two series in under 250 bytes", async () => {
  // Names made before the first reading: the data plane holds them for its snapshot anyway.
  const names = Array.from({ length: NODES }, (_, i) => ({
    upstream: `upstream-${String(i % 2_000).padStart(4, "0")}`,
    node: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}:8080`,
  }));
  const series = new NodeSeries();
  const before = await settledHeap();
  for (const { upstream, node } of names) {
    series.setHealthy(upstream, node, false);
    series.failed(upstream, node);
    series.failed(upstream, node);
  }
  const perNode = ((await settledHeap()) - before) / NODES;
  // The series still renders every node: the heap is not saved by dropping any.
  const text = await series.text();
  expect(text.split("\n").filter((l) => l.startsWith("clawgate_")).length).toBe(2 * NODES);
  expect(perNode).toBeLessThan(250);
});
