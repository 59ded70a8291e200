import { expect, it } from "vitest";
import { settledHeap } from "../testing/settled-heap.js";
import { NodeSeries } from "./node-series.js";

const NODES = 20_000;

/**
 * Issue 9: at 20,000 nodes each byte kept per node is 20 KB of heap the collector walks in the
 * seconds after boot. The two series of a node are its counts, rendered at scrape; kept as
 * finished lines they took about 500 bytes a node (labels, healthy and failures lines, each a
 * chain of concatenated strings); as an object of counts and a joined key, about 100, small
 * objects made after boot that a scavenge must copy while they are young (on a loaded machine,
 * maybe in the middle of a later one-route change). As slots in typed arrays, about 60: a map entry a node
 * (and 9 bytes in the arrays, which a scavenge does not copy).
 */
it("keeps each node's two series in under 80 bytes", async () => {
  // Names made before the first reading: the data plane holds them for its snapshot anyway.
  const names = Array.from({ length: NODES }, (_, i) => ({
    upstream: `upstream-${String(i % 2_000).padStart(4, "0")}`,
    node: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}:8080`,
  }));
  // Flat, as names decoded off the wire are: a template's result is a chain of pieces until
  // first hashed, and its flattening is not what the series keeps.
  new Set(names.flatMap(({ upstream, node }) => [upstream, node]));
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
  expect(perNode).toBeLessThan(80);
});
