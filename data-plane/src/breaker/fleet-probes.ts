import type { ProbeVerdict } from "@clawgate/proto";
import type { ProbeGate } from "./circuit-breaker.js";

/** What FleetProbes sends on the snapshot stream (ProbeClaim); false: no stream is open. */
export type SendProbeClaim = (claim: {
  upstream: string;
  released?: boolean;
  success?: boolean;
}) => boolean;

export interface FleetProbesOptions {
  /** This data plane's node id: a verdict naming it makes this data plane the prober. */
  nodeId: string;
  send: SendProbeClaim;
  /** Monotonic milliseconds. */
  now(): number;
  /** Applies another data plane's probe outcome to the local breaker (CircuitBreaker.fleetVerdict). */
  verdict(upstream: string, success: boolean): void;
  /** A claim with no answer, or a prober silent, this long is claimed again; default 10 s. */
  leaseMs?: number;
}

type Probe =
  | { readonly status: "mine" }
  | { readonly status: "waiting"; readonly since: number; readonly leaseMs: number };

/**
 * This data plane's side of fleet-wide half-open probing (breaker `fleetProbe`, seed 004): a
 * breaker that turns half-open asks the control plane for the upstream's probe and sends none
 * until the control plane names it the prober. The others wait, failing fast with 503 as while
 * open, until the prober's verdict arrives: success closes their breakers, failure opens them
 * again. Nothing stalls on a lost party: a claim unanswered, or a prober silent, for `leaseMs`
 * is claimed again (the control plane hands a lapsed claim to the next claimant, and frees a
 * prober's claim when its stream ends), and without a control plane each data plane probes on
 * its own, as it does without fleetProbe.
 */
export class FleetProbes implements ProbeGate {
  readonly #options: FleetProbesOptions;
  readonly #probes = new Map<string, Probe>();

  constructor(options: FleetProbesOptions) {
    this.#options = options;
  }

  mayProbe(upstream: string): boolean {
    const probe = this.#probes.get(upstream);
    if (probe?.status === "mine") return true;
    const now = this.#options.now();
    if (probe !== undefined && now - probe.since < probe.leaseMs) return false;
    if (!this.#options.send({ upstream })) return true;
    this.#probes.set(upstream, {
      status: "waiting",
      since: now,
      leaseMs: this.#options.leaseMs ?? 10_000,
    });
    return false;
  }

  probed(upstream: string, success: boolean): void {
    const probe = this.#probes.get(upstream);
    this.#probes.delete(upstream);
    if (probe?.status === "mine") this.#options.send({ upstream, released: true, success });
  }

  /** A ProbeVerdict arrived from the control plane. */
  onVerdict(verdict: ProbeVerdict): void {
    const { upstream, prober, outcome } = verdict;
    if (prober === this.#options.nodeId) {
      this.#probes.set(upstream, { status: "mine" });
      return;
    }
    if (prober !== "") {
      const leaseMs = Number(verdict.leaseMs) || (this.#options.leaseMs ?? 10_000);
      this.#probes.set(upstream, { status: "waiting", since: this.#options.now(), leaseMs });
      return;
    }
    // The probe is over: nobody holds it now.
    this.#probes.delete(upstream);
    if (outcome === "success") this.#options.verdict(upstream, true);
    else if (outcome === "failure") this.#options.verdict(upstream, false);
  }

  /** The stream ended: claims belonged to it, and the control plane dropped them. */
  reset(): void {
    this.#probes.clear();
  }
}
