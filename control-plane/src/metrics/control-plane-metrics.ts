import { Counter, Gauge, type Registry } from "prom-client";
import type { DataPlaneState } from "../fleet/data-plane-view.js";
import { DATA_PLANE_STATES } from "../fleet/fleet.js";
import type { SnapshotStatusSource } from "../snapshot/snapshot-status.js";
import { registerSnapshotBytesMetric } from "./snapshot-bytes-metric.js";
import { registerSnapshotSendsMetric } from "./snapshot-sends-metric.js";

export interface ControlPlaneMetricSources {
  builder: SnapshotStatusSource;
  fleet: { counts(): Record<DataPlaneState, number> };
}

export interface ControlPlaneMetrics {
  /** Counts one NACK from a data plane (clawgate_snapshot_nacks_total). */
  recordNack(): void;
  /** Counts the bytes of one snapshot written to a stream (clawgate_snapshot_bytes_sent_total). */
  recordSent(bytes: number): void;
  /** Counts one snapshot sent whole or as a delta (clawgate_snapshot_sends_total). */
  recordSend(kind: "full" | "delta"): void;
}

/**
 * Registers the control plane's snapshot and fleet metrics on `registry`. Gauges read their
 * sources at scrape time, so nothing has to remember to update them.
 */
export function registerControlPlaneMetrics(
  registry: Registry,
  sources: ControlPlaneMetricSources,
): ControlPlaneMetrics {
  new Gauge({
    name: "clawgate_snapshot_version",
    help: "Version (store revision) of the snapshot served to data planes; 0 before the first.",
    registers: [registry],
    collect() {
      this.set(sources.builder.status().publishedVersion ?? 0);
    },
  });
  new Gauge({
    name: "clawgate_snapshot_published",
    help: "1 when the newest config read was published, 0 when it was refused (see GET /v1/snapshot).",
    registers: [registry],
    collect() {
      this.set(sources.builder.status().published ? 1 : 0);
    },
  });
  new Gauge({
    name: "clawgate_dataplanes",
    help: "Data planes known to this control plane, by state.",
    labelNames: ["state"] as const,
    registers: [registry],
    collect() {
      const counts = sources.fleet.counts();
      for (const state of DATA_PLANE_STATES) this.set({ state }, counts[state]);
    },
  });
  const nacks = new Counter({
    name: "clawgate_snapshot_nacks_total",
    help: "Snapshots data planes refused to apply.",
    registers: [registry],
  });
  const recordSent = registerSnapshotBytesMetric(registry);
  const recordSend = registerSnapshotSendsMetric(registry);
  return {
    recordNack() {
      nacks.inc();
    },
    recordSent,
    recordSend,
  };
}
