import type { WorkerBreaker } from "../breaker/worker-breakers.js";
import type { VersionCounts } from "../outcomes/version-outcomes.js";

/**
 * What the primary and its proxy workers say to each other over the cluster IPC channel.
 * Snapshots and deltas travel as their protobuf bytes (base64: the channel is JSON), so a
 * worker decodes and compiles exactly what the control plane sent.
 */
export type ToWorker =
  /** First message after fork: the snapshot served now, applied before the worker listens. */
  | { type: "clawgate:init"; snapshot: string | undefined; unusable: readonly UnusableNode[] }
  /** Phase one: compile this update and hold it, without serving it yet. */
  | { type: "clawgate:prepare"; id: number; update: WorkerUpdate }
  /** Phase two: serve the update prepared under `id`. */
  | { type: "clawgate:commit"; id: number }
  /** Another worker (or the primary) refused: drop what was prepared under `id`. */
  | { type: "clawgate:abort"; id: number }
  /** A node entered or left rotation in the primary's health registry. */
  | { type: "clawgate:health"; upstream: string; address: string; usable: boolean }
  /** The worker's metrics for an aggregated /metrics. */
  | { type: "clawgate:metrics"; id: number }
  | { type: "clawgate:stop"; drainTimeoutMs: number }
  /** Are you alive? Answered with pong from the event loop (WorkerLiveness). */
  | { type: "clawgate:ping" }
  /** Sub-shares of tenant budgets for the worker's LeaseBook: a QuotaGrant, base64 protobuf. */
  | { type: "clawgate:quota-grant"; grant: string }
  /** Who probes a fleetProbe upstream, and how the last probe went (ProbeRelay). */
  | {
      type: "clawgate:probe-verdict";
      upstream: string;
      prober: string;
      outcome: string;
      leaseMs: number;
    }
  /** The primary's stream to the control plane opened or ended: leases and claims lapsed. */
  | { type: "clawgate:stream-reset"; connected: boolean };

export type FromWorker =
  /** Listening for messages: the primary answers with init (a message sent before is lost). */
  | { type: "clawgate:hello" }
  /** It cannot serve (listen, config, certificates, initial snapshot) and exits after this. */
  | { type: "clawgate:failed"; reason: string; listen?: WorkerListenFailure }
  /** Serving: the proxy address, and the HTTPS one with proxyTlsListen. */
  | { type: "clawgate:listening"; address: string; tlsAddress?: string | undefined }
  | { type: "clawgate:prepared"; id: number; ok: boolean; reason?: string }
  | { type: "clawgate:committed"; id: number }
  | { type: "clawgate:pong" }
  /** Requests answered and 5xx per config version, cumulative since the worker started. */
  | { type: "clawgate:outcomes"; versions: readonly VersionCounts[] }
  /** The worker's breakers that are not closed, all of them, after each transition. */
  | { type: "clawgate:breakers"; breakers: readonly WorkerBreaker[] }
  /** prom-client's MetricObjectWithValues[] of the worker's registry. */
  | { type: "clawgate:metrics-reply"; id: number; metrics: unknown[] }
  /** A connection to this node was refused: the primary's health registry decides. */
  | { type: "clawgate:refused"; upstream: string; address: string }
  /** What the worker's LeaseBook consumed, and its asks for more (SubShares). */
  | { type: "clawgate:quota-usage"; reports: readonly WorkerUsage[] }
  /** The worker's FleetProbes claims a half-open probe, or releases it with its outcome. */
  | { type: "clawgate:probe-claim"; upstream: string; released?: boolean; success?: boolean };

/** A ListenError's parts, so the primary can fail its start with the same error. */
export interface WorkerListenFailure {
  listener: string;
  address: string;
  code: string;
  /** The system error's message. */
  detail: string;
}

/** A ConsumptionReport on the JSON channel (bigints as decimal strings). */
export interface WorkerUsage {
  tenant: string;
  kind: number;
  window: string;
  consumed: string;
  wantsMore: boolean;
  limit: number;
}

/** A whole snapshot, or a delta on the version every worker serves, as base64 protobuf. */
export interface WorkerUpdate {
  kind: "snapshot" | "delta";
  bytes: string;
}

export interface UnusableNode {
  upstream: string;
  address: string;
}

/** A message of this protocol (anything else sharing the channel is ignored). */
function isClawgateMessage(message: unknown): boolean {
  return (
    typeof message === "object" &&
    message !== null &&
    typeof (message as { type?: unknown }).type === "string" &&
    (message as { type: string }).type.startsWith("clawgate:")
  );
}

export const isFromWorker = isClawgateMessage as (message: unknown) => message is FromWorker;
export const isToWorker = isClawgateMessage as (message: unknown) => message is ToWorker;

/** What a worker sends about fleet-wide coordination: tenant budgets and half-open probes. */
export type CoordinationMessage = Extract<
  FromWorker,
  { type: "clawgate:quota-usage" | "clawgate:probe-claim" }
>;
