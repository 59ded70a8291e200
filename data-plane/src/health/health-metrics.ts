import { Histogram, type Registry } from "prom-client";
import type { HealthChange, HealthState } from "./node-health.js";
import { NodeSeries } from "./node-series.js";

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
 * `clawgate_probe_failures_total{upstream,node}`. `node` is the node's address. The two per-node
 * families live in `nodeSeries`, outside the prom-client registry (see `NodeSeries`); serve
 * them with the registry through `metricsSource`.
 */
export class HealthMetrics implements HealthSink {
  /** `clawgate_upstream_node_healthy` and `clawgate_probe_failures_total`. */
  readonly nodeSeries = new NodeSeries();
  private readonly duration: Histogram<string>;

  constructor(registry: Registry) {
    const registers = [registry];
    // No labels: per-node latency series would multiply with the fleet; failures carry the node.
    this.duration = new Histogram({
      name: "clawgate_probe_duration_ms",
      help: "Duration of active health probes (TCP connect plus HTTP check) in milliseconds.",
      buckets: [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000],
      registers,
    });
  }

  track(upstream: string, address: string, state: HealthState): void {
    this.nodeSeries.setHealthy(upstream, address, state === "healthy");
  }

  change(change: HealthChange): void {
    this.track(change.upstream, change.address, change.to);
  }

  probe(upstream: string, address: string, ok: boolean, durationMs: number): void {
    this.duration.observe(durationMs);
    if (!ok) this.nodeSeries.failed(upstream, address);
  }

  forget(upstream: string, address: string): void {
    this.nodeSeries.forget(upstream, address);
  }
}
