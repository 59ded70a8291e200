import type { Registry } from "prom-client";
import { onePerTurn } from "../metrics/one-per-turn.js";

/**
 * A worker's registry as its /metrics reply (getMetricsAsJSON's shape), one family per
 * event-loop turn as the primary combines them: getMetricsAsJSON reads every family in one
 * turn, which at 10,000 routes times the histogram's buckets held this worker's requests and
 * pings for the whole of it. The worker's registry has no default labels, the one thing
 * getMetricsAsJSON adds to what each family gives.
 */
export async function registryReply(registry: Registry): Promise<unknown[]> {
  const families: unknown[] = [];
  const names = registry.getMetricsAsArray().map((metric) => metric.name);
  for await (const name of onePerTurn(names)) {
    const metric = registry.getSingleMetric(name);
    if (metric !== undefined) families.push(await metric.get());
  }
  return families;
}
