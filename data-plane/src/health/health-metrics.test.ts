import { Writable } from "node:stream";
import pino from "pino";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { metricsSource } from "../metrics/metrics-source.js";
import { HealthMetrics } from "./health-metrics.js";
import { HealthRegistry } from "./health-registry.js";
import type { ProbeResult } from "./prober/probe-protocol.js";

function setup() {
  const metricsRegistry = new Registry();
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      lines.push(JSON.parse(String(chunk)));
      callback();
    },
  });
  let deliver: (r: ProbeResult) => void = () => {};
  const healthMetrics = new HealthMetrics(metricsRegistry);
  // What /metrics serves: the registry plus the per-node series kept beside it.
  const source = metricsSource(metricsRegistry, healthMetrics.nodeSeries);
  const registry = new HealthRegistry({
    clock: new FakeClock(),
    metrics: healthMetrics,
    logger: pino({ level: "info" }, stream),
    prober: (onResults) => {
      deliver = (result) => onResults([result]);
      return { setUpstreams: () => {}, probeNow: () => {}, close: async () => {} };
    },
  });
  const probe = (address: string, ok: boolean, durationMs: number, evidence = {}) =>
    deliver({
      type: "result",
      upstream: "agents",
      address,
      ok,
      evidence,
      durationMs,
      at: 0,
      ticket: 0,
    });
  const target = (address: string) => ({ upstream: "agents", address, host: "h", port: 1 });
  const value = async (name: string, address: string) => {
    const line = (await source.metrics())
      .split("\n")
      .find((l) => l.startsWith(`${name}{upstream="agents",node="${address}"} `));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
  };
  const histogramCount = async () => {
    const metric = (await metricsRegistry.getMetricsAsJSON()).find(
      (m) => m.name === "clawgate_probe_duration_ms",
    );
    const values = (metric?.values ?? []) as { metricName?: string; value: number }[];
    return values.find((v) => v.metricName === "clawgate_probe_duration_ms_count")?.value;
  };
  return { registry, probe, target, value, histogramCount, lines, source };
}

describe("HealthMetrics", () => {
  it("tracks node health 1/0, probe failures and probe durations", async () => {
    const { registry, probe, target, value, histogramCount } = setup();
    registry.sync([target("10.0.0.1:80"), target("10.0.0.2:80")]);
    expect(await value("clawgate_upstream_node_healthy", "10.0.0.1:80")).toBe(1);

    probe("10.0.0.1:80", false, 3);
    probe("10.0.0.1:80", false, 3_000);
    probe("10.0.0.2:80", true, 2);
    expect(await value("clawgate_upstream_node_healthy", "10.0.0.1:80")).toBe(0);
    expect(await value("clawgate_upstream_node_healthy", "10.0.0.2:80")).toBe(1);
    expect(await value("clawgate_probe_failures_total", "10.0.0.1:80")).toBe(2);

    expect(await histogramCount()).toBe(3);

    registry.reportRefused("agents", "10.0.0.2:80");
    expect(await value("clawgate_upstream_node_healthy", "10.0.0.2:80")).toBe(0);

    registry.sync([target("10.0.0.2:80")]);
    expect(await value("clawgate_upstream_node_healthy", "10.0.0.1:80")).toBeUndefined();
    expect(await value("clawgate_probe_failures_total", "10.0.0.1:80")).toBeUndefined();
  });

  it("uses the metric names and labels operators rely on", async () => {
    const { registry, target, source } = setup();
    registry.sync([target("10.0.0.1:80")]);
    const text = await source.metrics();
    expect(text).toContain(
      'clawgate_upstream_node_healthy{upstream="agents",node="10.0.0.1:80"} 1',
    );
    expect(text).toContain("# TYPE clawgate_probe_duration_ms histogram");
    expect(text).toContain("# TYPE clawgate_probe_failures_total counter");
  });
});

describe("health change log lines", () => {
  it("logs one line per change with the probe's evidence", () => {
    const { registry, probe, target, lines } = setup();
    registry.sync([target("10.0.0.1:80")]);
    probe("10.0.0.1:80", false, 5, { tcpMs: 0.8, httpStatus: 500, error: "http 500" });
    expect(lines).toEqual([]);
    probe("10.0.0.1:80", false, 5, {
      tcpMs: 0.7,
      httpStatus: 200,
      bodyStatus: "degraded",
      error: 'status "degraded"',
    });
    probe("10.0.0.1:80", true, 5, { tcpMs: 0.5 });
    probe("10.0.0.1:80", true, 5, { tcpMs: 0.6, httpStatus: 200, bodyStatus: "ok" });
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({
      level: 40,
      msg: "upstream node evicted",
      upstream: "agents",
      node: "10.0.0.1:80",
      from: "healthy",
      to: "evicted",
      reason: "probe-failures",
      tcpMs: 0.7,
      httpStatus: 200,
      bodyStatus: "degraded",
      error: 'status "degraded"',
    });
    expect(lines[1]).toMatchObject({
      level: 30,
      msg: "upstream node back in rotation",
      reason: "probe-successes",
      evidence: "tcp 0.6ms, http 200, status ok",
    });
  });
});
