/**
 * SYNCED: applied the published version. SYNCING: behind, within the grace period.
 * STALE: behind for longer than the grace period. NACKED: refused the published version.
 * DISCONNECTED: no stream open.
 */
export type DataPlaneState = "SYNCED" | "SYNCING" | "STALE" | "NACKED" | "DISCONNECTED";

/** One data plane as `GET /v1/dataplanes` and `clawctl dataplanes` show it. */
export interface DataPlaneView {
  nodeId: string;
  hostname: string;
  softwareVersion: string;
  connected: boolean;
  state: DataPlaneState;
  /** Version the data plane last acknowledged; 0 when none. */
  appliedVersion: number;
  /** Version the control plane publishes now. */
  publishedVersion: number | null;
  lastNack?: { version: number; error: string; at: string };
  /** ISO time of the last message from the data plane. */
  lastSeen: string;
  connectedAt?: string;
  /** The control-plane replica it streams from (its instanceId); absent while disconnected. */
  replica?: string;
}

export interface FleetSource {
  list(): DataPlaneView[];
}
