/**
 * What a stream session asks of fleet-wide half-open probing (breaker `fleetProbe`, seed 004):
 * one control plane alone keeps claims in memory (ProbeCoordinator); replicas sharing etcd keep
 * them in the store (StoredProbeCoordinator), so the fleet has one prober per upstream.
 */
export interface ProbeVerdictMessage {
  readonly upstream: string;
  /** Node id of the data plane probing now; "" when nobody is. */
  readonly prober: string;
  /** "success", "failure", or "" when no probe finished (none yet, or the prober was lost). */
  readonly outcome: "success" | "failure" | "";
  readonly leaseMs: number;
}

/** A stream's end of the coordinator: who it is and how to reach it. */
export interface ProbeParty {
  /** Unique per stream (a data plane reconnecting is a new party). */
  readonly id: string;
  readonly nodeId: string;
  send(verdict: ProbeVerdictMessage): void;
}

export interface ProbeCoordination {
  /** `party` wants to probe `upstream`: it is named the prober unless a live claim exists. */
  claim(party: ProbeParty, upstream: string): void;
  /** The prober's probe ended: every party that waited learns how. Others' releases are ignored. */
  release(party: ProbeParty, upstream: string, success: boolean): void;
  /** A stream ended: a probe it held is released with no outcome, so a waiter can claim. */
  leave(party: ProbeParty): void;
}
