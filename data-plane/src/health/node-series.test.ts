import { Counter, Gauge, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { NodeSeries } from "./node-series.js";

describe("NodeSeries", () => {
  it("writes the same lines prom-client wrote for the two per-node families", async () => {
    // The reference: the gauge and counter these families were before they were cached.
    const registry = new Registry();
    const healthy = new Gauge({
      name: "clawgate_upstream_node_healthy",
      help: "1 while the upstream node is in rotation, 0 while quarantined or evicted.",
      labelNames: ["upstream", "node"],
      registers: [registry],
    });
    const failures = new Counter({
      name: "clawgate_probe_failures_total",
      help: "Failed active health probes, by upstream and node.",
      labelNames: ["upstream", "node"],
      registers: [registry],
    });
    const series = new NodeSeries();
    // An address with every character the text format escapes.
    const odd = 'a"b\\c\nd:1';
    for (const [upstream, node, up, failed] of [
      ["agents", "10.0.0.1:80", true, 0],
      ["agents", "10.0.0.2:80", false, 3],
      ["tools", odd, false, 1],
    ] as const) {
      healthy.set({ upstream, node }, up ? 1 : 0);
      series.setHealthy(upstream, node, up);
      for (let i = 0; i < failed; i++) {
        failures.inc({ upstream, node });
        series.failed(upstream, node);
      }
    }
    expect(await series.text()).toBe(`${(await registry.metrics()).replace("\n\n", "\n")}`);

    healthy.remove({ upstream: "agents", node: "10.0.0.2:80" });
    failures.remove({ upstream: "agents", node: "10.0.0.2:80" });
    series.forget("agents", "10.0.0.2:80");
    healthy.set({ upstream: "tools", node: odd }, 1);
    series.setHealthy("tools", odd, true);
    expect(await series.text()).toBe(`${(await registry.metrics()).replace("\n\n", "\n")}`);
    expect(await series.text(new Set(["clawgate_probe_failures_total"]))).toBe(
      await registry.getSingleMetricAsString("clawgate_probe_failures_total").then((t) => `${t}\n`),
    );
  });

  it("lets other work run while it renders 20,000 nodes", async () => {
    const series = new NodeSeries();
    for (let i = 0; i < 20_000; i++) {
      series.setHealthy(`u-${i % 2_000}`, `10.1.${i >> 8}.${i & 255}:80`, false);
      series.failed(`u-${i % 2_000}`, `10.1.${i >> 8}.${i & 255}:80`);
    }
    // Counts event-loop turns taken by other work while the scrape is rendered.
    let turns = 0;
    let rendering = true;
    const tick = () => {
      turns++;
      if (rendering) setImmediate(tick);
    };
    setImmediate(tick);
    const text = await series.text();
    rendering = false;
    expect(text.split("\n").filter((l) => l.startsWith("clawgate_")).length).toBe(40_000);
    // One turn for all of it would leave the other work waiting until the scrape was done.
    expect(turns).toBeGreaterThanOrEqual(10);
  });
});
