import type { ProbeVerdict } from "@clawgate/proto";
import type { FleetProbes } from "./fleet-probes.js";

/** A ProbeVerdict as the primary passes it to a proxy worker's FleetProbes. */
export interface WorkerVerdict {
  readonly upstream: string;
  readonly prober: string;
  readonly outcome: string;
  readonly leaseMs: number;
}

/** How a proxy worker's FleetProbes is named in the verdicts the primary sends it. */
export function workerProberId(worker: number): string {
  return `worker-${worker}`;
}

export interface ProbeRelayOptions {
  /** The primary's FleetProbes: the data plane's one claim on the control plane. */
  fleet: Pick<FleetProbes, "mayProbe" | "probed">;
  /** This data plane's node id, as the control plane names its prober. */
  nodeId: string;
  /** Workers that hear messages now (cluster worker ids). */
  workers(): readonly number[];
  send(worker: number, verdict: WorkerVerdict): void;
}

/**
 * The primary's side of `breaker.fleetProbe` with `workers` > 1. The control plane sees one
 * data plane, so one worker probes for it: each worker runs a FleetProbes that claims through
 * this relay, which claims through the primary's FleetProbes (one claim per data plane on the
 * stream). When the data plane holds the probe, the first worker that claimed it probes; the
 * others wait as the other data planes do. Every verdict the control plane relays reaches every
 * worker, and when the probing worker is done the other workers hear its outcome at once (the
 * control plane's copy follows; a verdict a breaker already took changes nothing). Without a
 * stream the data plane probes on its own, still with one worker.
 */
export class ProbeRelay {
  readonly #options: ProbeRelayOptions;
  /** The worker probing each upstream for this data plane. */
  readonly #probers = new Map<string, number>();
  /** Workers that claimed an upstream's probe and wait for the control plane's answer. */
  readonly #claimants = new Map<string, Set<number>>();

  constructor(options: ProbeRelayOptions) {
    this.#options = options;
  }

  /** A worker's breaker turned half-open and asks to probe `upstream`. */
  claim(worker: number, upstream: string): void {
    const prober = this.#probers.get(upstream);
    // Another worker probes for this data plane: this one waits for its verdict.
    if (prober !== undefined && prober !== worker && this.#alive(prober)) return;
    if (this.#options.fleet.mayProbe(upstream)) {
      this.#designate(upstream, worker);
      return;
    }
    let waiting = this.#claimants.get(upstream);
    if (waiting === undefined) {
      waiting = new Set();
      this.#claimants.set(upstream, waiting);
    }
    waiting.add(worker);
  }

  /** A worker's probing of `upstream` ended: closed (true) or opened again (false). */
  probed(worker: number, upstream: string, success: boolean): void {
    const prober = this.#probers.get(upstream);
    if (prober !== undefined && prober !== worker) return;
    this.#probers.delete(upstream);
    this.#options.fleet.probed(upstream, success);
    const verdict = { upstream, prober: "", outcome: success ? "success" : "failure", leaseMs: 0 };
    for (const other of this.#options.workers()) {
      if (other !== worker) this.#options.send(other, verdict);
    }
  }

  /** A ProbeVerdict from the control plane, after the primary's FleetProbes took it. */
  onVerdict(verdict: ProbeVerdict): void {
    const { upstream, prober, outcome } = verdict;
    if (prober === this.#options.nodeId) {
      // This data plane probes: the first worker still alive that asked does.
      const claimants = this.#claimants.get(upstream);
      this.#claimants.delete(upstream);
      const first = [...(claimants ?? [])].find((worker) => this.#alive(worker));
      if (first !== undefined) this.#designate(upstream, first);
      // Nobody left to probe: the next worker that claims is told at once (mayProbe is true).
      return;
    }
    this.#probers.delete(upstream);
    this.#claimants.delete(upstream);
    const passed = { upstream, prober, outcome, leaseMs: Number(verdict.leaseMs) };
    for (const worker of this.#options.workers()) this.#options.send(worker, passed);
  }

  /** A worker died: a probe it held goes to the next worker that claims. */
  forget(worker: number): void {
    for (const [upstream, prober] of this.#probers) {
      if (prober === worker) this.#probers.delete(upstream);
    }
    for (const waiting of this.#claimants.values()) waiting.delete(worker);
  }

  /** The stream ended or opened: claims belonged to it (the workers reset theirs too). */
  reset(): void {
    this.#probers.clear();
    this.#claimants.clear();
  }

  #designate(upstream: string, worker: number): void {
    this.#probers.set(upstream, worker);
    this.#options.send(worker, {
      upstream,
      prober: workerProberId(worker),
      outcome: "",
      leaseMs: 0,
    });
  }

  #alive(worker: number): boolean {
    return this.#options.workers().includes(worker);
  }
}
