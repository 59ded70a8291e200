import { create, TenantSchema } from "@clawgate/proto";
import { Counter, Registry } from "prom-client";
import { afterEach, describe, expect, it, vi } from "vitest";
import { LayeredMap } from "../compiler/layered-map.js";
import { metricsSource } from "../metrics/metrics-source.js";
import { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { RouteDurationHistogram } from "../metrics/route-duration-histogram.js";
import { TenantMetrics } from "../metrics/tenant-metrics.js";
import { RetryMetrics } from "../proxy/retry-metrics.js";
import { deltaOf, snapshotOf } from "../testing/delta-fixture.js";
import { registryReply } from "../workers/worker-registry-reply.js";
import { AppliedSnapshot, type CompiledSnapshot } from "./applied-snapshot.js";
import { followSwap } from "./follow-swap.js";

// The size the defect was found at: 10,000 routes, each with its series.
const ROUTES = 10_000;
const UPSTREAMS = 2_000;

afterEach(() => {
  vi.restoreAllMocks();
});

/** The request-path metrics of one process (the single data plane or a worker). */
function requestPathMetrics() {
  const registry = new Registry();
  const proxy = new ProxyMetrics(registry);
  const tenants = new TenantMetrics(registry);
  const retries = new RetryMetrics(registry);
  return { registry, proxy, tenants, retries, all: [proxy, tenants, retries] };
}

/** followSwap with the request path's other state stubbed: only the metrics are looked at. */
function swap(
  previous: CompiledSnapshot | undefined,
  next: CompiledSnapshot,
  metrics: ReturnType<typeof requestPathMetrics>["all"],
) {
  followSwap(
    previous,
    next,
    {
      pools: { retain: () => {} },
      healing: { syncChanged: () => true, syncInTurns: async () => {} },
      outcomes: { serving: () => {} },
      metrics,
    },
    { error: (obj: unknown) => expect.fail(`a step failed: ${JSON.stringify(obj)}`) },
  );
}

function served(applied: AppliedSnapshot): CompiledSnapshot {
  const current = applied.current();
  if (current === undefined) throw new Error("nothing served");
  return current;
}

/** The label values of `label` over every series of the worker's reply. */
async function labelled(registry: Registry, label: string): Promise<Set<string>> {
  const values = new Set<string>();
  for (const family of (await registryReply(registry)) as {
    values: { labels: Record<string, unknown> }[];
  }[]) {
    for (const series of family.values) {
      const value = series.labels[label];
      if (value !== undefined) values.add(String(value));
    }
  }
  return values;
}

describe("followSwap and the series of removed names", () => {
  it("drops a removed route's series on a one-route delta, touching only that route's", async () => {
    const applied = new AppliedSnapshot();
    applied.apply(snapshotOf(1, ROUTES, UPSTREAMS));
    const before = served(applied);
    const metrics = requestPathMetrics();
    swap(undefined, before, metrics.all);
    for (let i = 0; i < ROUTES; i++) {
      metrics.proxy.request(`r-${i}`, `u-${i % UPSTREAMS}`, 200, 0.01);
    }
    // The counts reach prom-client at a read, as at every scrape.
    await metrics.registry.getMetricsAsJSON();

    applied.applyDelta(deltaOf(2, { removedRoutes: ["r-7"] }));
    const removes = vi.spyOn(Counter.prototype, "remove");
    const counterReads = vi.spyOn(Counter.prototype, "get");
    const histogramReads = vi.spyOn(RouteDurationHistogram.prototype, "get");
    const walks = ["keys", "values", "entries", Symbol.iterator] as const;
    const wireWalks = walks.map((walk) => vi.spyOn(LayeredMap.prototype, walk as "keys"));
    swap(before, served(applied), metrics.all);

    // The work is r-7's one requests_total series and its histogram: no registry read, no
    // walk of the 10,000 routes' names or series.
    expect(removes).toHaveBeenCalledTimes(1);
    expect(removes.mock.calls[0]![0]).toEqual({ route: "r-7", upstream: "u-7", code: "200" });
    expect(counterReads).not.toHaveBeenCalled();
    expect(histogramReads).not.toHaveBeenCalled();
    for (const wireWalk of wireWalks) expect(wireWalk).not.toHaveBeenCalled();
    vi.restoreAllMocks();

    const routes = await labelled(metrics.registry, "route");
    expect(routes.has("r-7")).toBe(false);
    expect(routes.has("r-8")).toBe(true);
    expect(routes.size).toBe(ROUTES - 1);
    // The single process's /metrics renders the same registry.
    const text = await metricsSource(metrics.registry).metrics();
    expect(text).not.toContain('route="r-7"');
    expect(text).toContain('clawgate_requests_total{route="r-8",upstream="u-8",code="200"} 1');
  });

  it("drops the series of routes, upstreams and tenants a whole snapshot leaves out", async () => {
    const applied = new AppliedSnapshot();
    const first = snapshotOf(1, 10, 5);
    first.tenants = ["acme", "globex"].map((name) => create(TenantSchema, { name }));
    applied.apply(first);
    const before = served(applied);
    const metrics = requestPathMetrics();
    swap(undefined, before, metrics.all);
    metrics.proxy.request("r-1", "u-1", 200, 0.01);
    metrics.proxy.request("r-2", "u-2", 502, 0.01);
    metrics.proxy.upstreamError("u-4", "refused");
    metrics.retries.retried("u-4", "refused");
    metrics.tenants.request("acme", 200);
    metrics.tenants.tokens("acme", 5);
    metrics.tenants.request("globex", 200);

    // r-1 is gone, and u-4 with the routes naming it, and tenant acme.
    const second = snapshotOf(2, 10, 4);
    second.routes = second.routes.filter(
      (route) => !["r-1", "r-3", "r-4", "r-8", "r-9"].includes(route.name),
    );
    second.tenants = [create(TenantSchema, { name: "globex" })];
    expect(applied.apply(second).ok).toBe(true);
    swap(before, served(applied), metrics.all);

    expect(await labelled(metrics.registry, "route")).toEqual(new Set(["r-2"]));
    expect(await labelled(metrics.registry, "upstream")).toEqual(new Set(["u-2"]));
    expect(await labelled(metrics.registry, "tenant")).toEqual(new Set(["globex"]));
  });
});
