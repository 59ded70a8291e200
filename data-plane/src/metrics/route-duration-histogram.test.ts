import { AggregatorRegistry, Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { RouteDurationHistogram } from "./route-duration-histogram.js";

const NAME = "clawgate_request_duration_seconds";
const HELP = "Time from receiving a request to the end of its response, by route.";
const BOUNDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

// Observations on every side of the bounds: exactly on one, between, past the last.
const OBSERVED: [string, number][] = [
  ["chat", 0.0004],
  ["chat", 0.001],
  ["tools", 0.3],
  ["chat", 0.0123],
  ["chat", 61],
  ["tools", 2.5],
  ["chat", 0.75],
];

/** What prom-client's own Histogram renders for the same observations: what scrapers saw. */
function promClientReference(): Registry {
  const registry = new Registry();
  const histogram = new Histogram({
    name: NAME,
    help: HELP,
    labelNames: ["route"],
    buckets: BOUNDS,
    registers: [registry],
  });
  for (const [route, seconds] of OBSERVED) histogram.labels({ route }).observe(seconds);
  return registry;
}

function ours(): Registry {
  const registry = new Registry();
  const histogram = new RouteDurationHistogram(NAME, HELP, BOUNDS, registry);
  for (const [route, seconds] of OBSERVED) histogram.observe(route, seconds);
  return registry;
}

describe("RouteDurationHistogram", () => {
  it("renders the same exposition as a prom-client Histogram fed the same observations", async () => {
    const text = await ours().metrics();
    expect(text).toBe(await promClientReference().metrics());
    // Spot checks, so the comparison above cannot pass on two empty outputs.
    expect(text).toContain(`${NAME}_bucket{le="0.001",route="chat"} 2`);
    expect(text).toContain(`${NAME}_bucket{le="60",route="chat"} 4`);
    expect(text).toContain(`${NAME}_bucket{le="+Inf",route="chat"} 5`);
    expect(text).toContain(`${NAME}_count{route="tools"} 2`);
  });

  it("gives the workers' aggregation the same JSON as prom-client, summed across workers", async () => {
    // prom-client's values also carry an empty exemplar, which nothing here reads.
    const plain = async (registry: Registry) =>
      (await registry.getMetricsAsJSON()).map(({ values, ...family }) => ({
        ...family,
        values: (values as { metricName?: string }[]).map(({ metricName, ...v }) => ({
          metricName,
          labels: (v as { labels: unknown }).labels,
          value: (v as { value: number }).value,
        })),
      }));
    expect(await plain(ours())).toEqual(await plain(promClientReference()));
    const summed = AggregatorRegistry.aggregate([
      await ours().getMetricsAsJSON(),
      await ours().getMetricsAsJSON(),
    ]);
    const text = await summed.metrics();
    expect(text).toContain(`${NAME}_bucket{le="+Inf",route="chat"} 10`);
    expect(text).toContain(`${NAME}_count{route="tools"} 4`);
  });

  it("forgets its series on a registry reset, and refuses bounds that do not ascend", async () => {
    const registry = ours();
    registry.resetMetrics();
    expect(await registry.metrics()).not.toContain(`${NAME}_count`);
    expect(() => new RouteDurationHistogram(NAME, HELP, [1, 0.5], new Registry())).toThrow(
      /bucket bounds must ascend, got 1, 0.5/,
    );
  });
});
