import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { HealthChange, HealthState } from "./node-health.js";

/** What the health registry reports to metrics; `HealthMetrics` implements it. */
export interface HealthSink {
  /** The node is now watched, in `state`. */
  track(upstream: string, address: string, state: HealthState): void;
  change(change: HealthChange): void;
  /** One probe finished. */
  probe(upstream: string, address: string, ok: boolean, durationMs: number): void;
  /** The node left the snapshot; drop its series. */
  forget(upstream: string, address: string): void;
}

/**
 * The health metrics: `clawgate_upstream_node_healthy{upstream,node}` (named in DESIGN.md; 1 only
 * while the node is in rotation, so a quarantined node reads 0), `clawgate_probe_duration_ms` and
 * `clawgate_probe_failures_total{upstream,node}`. `node` is the node's address.
 */
export class HealthMetrics implements HealthSink {
  private readonly healthy: Gauge<"upstream" | "node">;
  private readonly duration: Histogram<string>;
  private readonly failures: Counter<"upstream" | "node">;

  constructor(registry: Registry) {
    const registers = [registry];
    this.healthy = new Gauge({
      name: "clawgate_upstream_node_healthy",
      help: "1 while the upstream node is in rotation, 0 while quarantined or evicted.",
      labelNames: ["upstream", "node"],
      registers,
    });
    // No labels: per-node latency series would multiply with the fleet; failures carry the node.
    this.duration = new Histogram({
      name: "clawgate_probe_duration_ms",
      help: "Duration of active health probes (TCP connect plus HTTP check) in milliseconds.",
      buckets: [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000],
      registers,
    });
    this.failures = new Counter({
      name: "clawgate_probe_failures_total",
      help: "Failed active health probes, by upstream and node.",
      labelNames: ["upstream", "node"],
      registers,
    });
  }

  track(upstream: string, address: string, state: HealthState): void {
    this.healthy.set({ upstream, node: address }, state === "healthy" ? 1 : 0);
  }

  change(change: HealthChange): void {
    this.track(change.upstream, change.address, change.to);
  }

  probe(upstream: string, address: string, ok: boolean, durationMs: number): void {
    this.duration.observe(durationMs);
    if (!ok) this.failures.inc({ upstream, node: address });
  }

  forget(upstream: string, address: string): void {
    this.healthy.remove({ upstream, node: address });
    this.failures.remove({ upstream, node: address });
  }
}
