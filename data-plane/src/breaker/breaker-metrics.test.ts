import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { BreakerMetrics } from "./breaker-metrics.js";
import { BreakerRegistry } from "./breaker-registry.js";
import type { BreakerPermit } from "./circuit-breaker.js";

async function values(registry: Registry, name: string) {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  if (!metric) throw new Error(`no metric ${name}`);
  return metric.values.map((v) => ({ labels: v.labels, value: v.value }));
}

describe("BreakerMetrics", () => {
  it("registers exactly the names in DESIGN.md", async () => {
    const registry = new Registry();
    new BreakerMetrics(registry);
    const names = (await registry.getMetricsAsJSON()).map((m) => [m.name, m.type]);
    expect(names).toEqual([
      ["clawgate_breaker_state", "gauge"],
      ["clawgate_breaker_transitions_total", "counter"],
      ["clawgate_breaker_rejections_total", "counter"],
      ["clawgate_breaker_probe_latency_ms", "histogram"],
      ["clawgate_breaker_retry_after_skips_total", "counter"],
    ]);
  });

  it("follows a breaker through open, half-open and closed", async () => {
    const registry = new Registry();
    const metrics = new BreakerMetrics(registry);
    const clock = new FakeClock();
    const breakers = new BreakerRegistry({ clock, random: () => 0, metrics });
    const breaker = breakers.get("agents", { consecutiveFailures: 1 });
    expect(await values(registry, "clawgate_breaker_state")).toEqual([
      { labels: { upstream: "agents" }, value: 0 },
    ]);

    breaker.record(breaker.acquire() as BreakerPermit, "transport");
    expect(await values(registry, "clawgate_breaker_state")).toEqual([
      { labels: { upstream: "agents" }, value: 2 },
    ]);

    clock.advance(30_000);
    const probe = breaker.acquire() as BreakerPermit;
    expect(await values(registry, "clawgate_breaker_state")).toEqual([
      { labels: { upstream: "agents" }, value: 1 },
    ]);
    breaker.record(probe, "success");
    breaker.record(breaker.acquire() as BreakerPermit, "success");
    expect(await values(registry, "clawgate_breaker_state")).toEqual([
      { labels: { upstream: "agents" }, value: 0 },
    ]);
    expect(await values(registry, "clawgate_breaker_transitions_total")).toEqual([
      { labels: { upstream: "agents", from: "closed", to: "open" }, value: 1 },
      { labels: { upstream: "agents", from: "open", to: "half-open" }, value: 1 },
      { labels: { upstream: "agents", from: "half-open", to: "closed" }, value: 1 },
    ]);
  });

  it("counts an upstream that left and came back from zero, under its label", async () => {
    const registry = new Registry();
    const metrics = new BreakerMetrics(registry);
    metrics.rejected("a");
    metrics.retryAfterSkip("a");
    metrics.forget("a");
    expect(await values(registry, "clawgate_breaker_rejections_total")).toEqual([]);
    metrics.rejected("a");
    metrics.retryAfterSkip("a");
    expect(await values(registry, "clawgate_breaker_rejections_total")).toEqual([
      { labels: { upstream: "a" }, value: 1 },
    ]);
    expect(await values(registry, "clawgate_breaker_retry_after_skips_total")).toEqual([
      { labels: { upstream: "a" }, value: 1 },
    ]);
  });

  it("counts rejections, skips and probe latency", async () => {
    const registry = new Registry();
    const metrics = new BreakerMetrics(registry);
    metrics.rejected("a");
    metrics.rejected("a");
    metrics.retryAfterSkip("b");
    metrics.probeLatency(30);
    metrics.probeLatency(3_000);
    expect(await values(registry, "clawgate_breaker_rejections_total")).toEqual([
      { labels: { upstream: "a" }, value: 2 },
    ]);
    expect(await values(registry, "clawgate_breaker_retry_after_skips_total")).toEqual([
      { labels: { upstream: "b" }, value: 1 },
    ]);
    const buckets = (await values(registry, "clawgate_breaker_probe_latency_ms")).filter(
      (v) => v.labels.le !== undefined,
    );
    expect(buckets).toEqual([
      { labels: { le: 25 }, value: 0 },
      { labels: { le: 50 }, value: 1 },
      { labels: { le: 100 }, value: 1 },
      { labels: { le: 250 }, value: 1 },
      { labels: { le: 500 }, value: 1 },
      { labels: { le: 1000 }, value: 1 },
      { labels: { le: 2000 }, value: 1 },
      { labels: { le: "+Inf" }, value: 2 },
    ]);
  });

  it("forget removes every series of the upstream and no other", async () => {
    const registry = new Registry();
    const metrics = new BreakerMetrics(registry);
    for (const upstream of ["gone", "kept"]) {
      metrics.track(upstream, "closed");
      metrics.transition({ upstream, from: "closed", to: "open", reason: "failure_ratio", at: 0 });
      metrics.rejected(upstream);
      metrics.retryAfterSkip(upstream);
    }
    metrics.forget("gone");
    const text = await registry.metrics();
    expect(text).not.toContain('upstream="gone"');
    expect(text).toContain('clawgate_breaker_state{upstream="kept"} 2');
    expect(text).toContain(
      'clawgate_breaker_transitions_total{upstream="kept",from="closed",to="open"} 1',
    );
    expect(text).toContain('clawgate_breaker_rejections_total{upstream="kept"} 1');
    expect(text).toContain('clawgate_breaker_retry_after_skips_total{upstream="kept"} 1');
  });
});
