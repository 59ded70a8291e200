import { Counter, Registry } from "prom-client";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ProxyMetrics } from "./proxy-metrics.js";

async function requests(registry: Registry): Promise<Record<string, number>> {
  const metric = (await registry.getMetricsAsJSON()).find(
    (m) => m.name === "clawgate_requests_total",
  );
  const out: Record<string, number> = {};
  for (const v of (metric?.values ?? []) as { labels: Record<string, string>; value: number }[]) {
    out[`${v.labels.route} ${v.labels.upstream} ${v.labels.code}`] = v.value;
  }
  return out;
}

describe("ProxyMetrics", () => {
  afterEach(() => vi.restoreAllMocks());

  it("every counted request is in the next scrape, and label hashing happens per series per scrape, not per request", async () => {
    // prom-client hashes and validates the labels inside inc(), even through a cached child;
    // a counter takes its inc() from this method when it is built.
    const prototype = Counter.prototype as unknown as { incWithoutExemplar(): void };
    const inc = vi.spyOn(prototype, "incWithoutExemplar");
    const registry = new Registry();
    const metrics = new ProxyMetrics(registry);
    for (let i = 0; i < 1_000; i++) metrics.request("r", "u", i % 10 === 0 ? 503 : 200, 0.001);
    expect(await requests(registry)).toEqual({ "r u 200": 900, "r u 503": 100 });
    expect(inc).toHaveBeenCalledTimes(2);

    metrics.request("r", "u", 200, 0.001);
    expect(await requests(registry)).toEqual({ "r u 200": 901, "r u 503": 100 });
    // A scrape with nothing new adds nothing.
    expect(await requests(registry)).toEqual({ "r u 200": 901, "r u 503": 100 });
    expect(inc).toHaveBeenCalledTimes(3);
  });
});
