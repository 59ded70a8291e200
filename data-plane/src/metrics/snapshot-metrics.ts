import { Counter, collectDefaultMetrics, Gauge, type Registry } from "prom-client";

/**
 * Snapshot and control-plane health as operators alert on them (a DP stale or NACKing).
 * A version is always a value, never a label, so the series count stays fixed.
 */
export class SnapshotMetrics {
  readonly #version: Gauge;
  readonly #appliedAt: Gauge;
  readonly #nacks: Counter;
  readonly #connected: Gauge;

  constructor(registry: Registry) {
    collectDefaultMetrics({ register: registry });
    this.#version = new Gauge({
      name: "clawgate_snapshot_version",
      help: "Version (store revision) of the snapshot this data plane serves; 0 before one",
      registers: [registry],
    });
    this.#appliedAt = new Gauge({
      name: "clawgate_snapshot_applied_timestamp_seconds",
      help: "Unix time the serving snapshot was applied; 0 before one",
      registers: [registry],
    });
    this.#nacks = new Counter({
      name: "clawgate_snapshot_nacks_total",
      help: "Snapshots this data plane refused (NACKed), keeping its last good one",
      registers: [registry],
    });
    this.#connected = new Gauge({
      name: "clawgate_control_plane_connected",
      help: "1 while a snapshot stream to a control plane is open, else 0",
      registers: [registry],
    });
    this.#version.set(0);
    this.#appliedAt.set(0);
    this.#connected.set(0);
  }

  applied(version: number, appliedAtMs: number): void {
    this.#version.set(version);
    this.#appliedAt.set(appliedAtMs / 1000);
  }

  nacked(): void {
    this.#nacks.inc();
  }

  connected(isConnected: boolean): void {
    this.#connected.set(isConnected ? 1 : 0);
  }
}
