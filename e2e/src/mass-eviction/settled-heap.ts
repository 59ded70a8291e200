import { type DataPlane, metricValue } from "../support/index.js";

/**
 * The data plane's used heap as its /metrics reports it, taken as the lowest of `samples`
 * scrapes in a row. The process cannot be made to collect garbage from outside, and one scrape
 * may land just before a collection; the lowest of several is close to the live heap, which is
 * what a leak grows.
 */
export async function settledHeapBytes(dp: DataPlane, samples = 10): Promise<number> {
  let lowest = Number.POSITIVE_INFINITY;
  for (let i = 0; i < samples; i++) {
    const used = metricValue(await dp.metrics(), "nodejs_heap_size_used_bytes");
    if (used === undefined)
      throw new Error(`${dp.nodeId} /metrics has no nodejs_heap_size_used_bytes`);
    lowest = Math.min(lowest, used);
  }
  return lowest;
}
