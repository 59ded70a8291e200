import type { ProbeCoordination, ProbeParty, ProbeVerdictMessage } from "./probe-coordination.js";

export type { ProbeParty, ProbeVerdictMessage } from "./probe-coordination.js";

export interface ProbeCoordinatorOptions {
  now(): number;
  /** A claim without a release lapses after this; default 10 s. */
  leaseMs?: number;
}

interface Probe {
  prober: ProbeParty | undefined;
  claimedAt: number;
  /** Parties that claimed while someone else probed: they get the outcome. */
  readonly waiting: Map<string, ProbeParty>;
}

/**
 * Half-open probes serialized across the fleet (breaker `fleetProbe`, seed 004: "serialize
 * probes across hosts, so not every host stabs at once"). A data plane whose breaker goes
 * half-open claims the upstream's probe; the first claim wins, the others wait, and when the
 * prober releases, every data plane that claimed gets the outcome. A claim lapses after
 * `leaseMs` without a release, and a prober's stream ending releases it, so a lost prober
 * never stalls the fleet: the next claim after that is granted. In memory: for one control plane
 * serving the whole fleet (the embedded store); replicas on etcd use StoredProbeCoordinator.
 */
export class ProbeCoordinator implements ProbeCoordination {
  readonly #now: () => number;
  readonly #leaseMs: number;
  readonly #probes = new Map<string, Probe>();

  constructor(options: ProbeCoordinatorOptions) {
    this.#now = options.now;
    this.#leaseMs = options.leaseMs ?? 10_000;
  }

  /** `party` wants to probe `upstream`: it becomes the prober unless a live claim exists. */
  claim(party: ProbeParty, upstream: string): void {
    let probe = this.#probes.get(upstream);
    if (probe === undefined) {
      probe = { prober: undefined, claimedAt: 0, waiting: new Map() };
      this.#probes.set(upstream, probe);
    }
    const now = this.#now();
    const lapsed = probe.prober !== undefined && now - probe.claimedAt >= this.#leaseMs;
    if (probe.prober === undefined || lapsed || probe.prober.id === party.id) {
      if (lapsed && probe.prober !== undefined) probe.waiting.set(probe.prober.id, probe.prober);
      probe.prober = party;
      probe.claimedAt = now;
      probe.waiting.delete(party.id);
    } else {
      probe.waiting.set(party.id, party);
    }
    party.send(this.#verdict(upstream, probe.prober.nodeId, ""));
  }

  /** The prober's probe ended: every party that waited learns how. Others' releases are ignored. */
  release(party: ProbeParty, upstream: string, success: boolean): void {
    const probe = this.#probes.get(upstream);
    if (probe?.prober?.id !== party.id) return;
    this.#finish(upstream, probe, success ? "success" : "failure");
  }

  /** A stream ended: a probe it held is released with no outcome, so a waiter can claim. */
  leave(party: ProbeParty): void {
    for (const [upstream, probe] of this.#probes) {
      probe.waiting.delete(party.id);
      if (probe.prober?.id === party.id) this.#finish(upstream, probe, "");
    }
  }

  #finish(upstream: string, probe: Probe, outcome: ProbeVerdictMessage["outcome"]): void {
    const waiting = [...probe.waiting.values()];
    this.#probes.delete(upstream);
    const verdict = this.#verdict(upstream, "", outcome);
    for (const party of waiting) party.send(verdict);
  }

  #verdict(
    upstream: string,
    prober: string,
    outcome: ProbeVerdictMessage["outcome"],
  ): ProbeVerdictMessage {
    return { upstream, prober, outcome, leaseMs: this.#leaseMs };
  }
}
