import type { Clock } from "../clock/clock.js";
import type { ProbeEvidence } from "./prober/probe-protocol.js";

/**
 * - healthy: in rotation.
 * - quarantined: a live request was refused; out of rotation until a probe confirms or clears it.
 * - evicted: probes failed `unhealthyThreshold` times in a row; out until `healthyThreshold`
 *   probes in a row succeed.
 */
export type HealthState = "healthy" | "quarantined" | "evicted";

export type HealthChangeReason =
  /** healthy or quarantined -> evicted: consecutive probe failures reached the threshold. */
  | "probe-failures"
  /** evicted -> healthy: consecutive probe successes reached the threshold. */
  | "probe-successes"
  /** healthy -> quarantined: a live request's connection was refused. */
  | "connection-refused"
  /** quarantined -> healthy: the confirming probe succeeded. */
  | "probe-cleared";

/** One state change, for metrics, the log and the heal journal. */
export interface HealthChange {
  readonly upstream: string;
  readonly address: string;
  readonly from: HealthState;
  readonly to: HealthState;
  readonly reason: HealthChangeReason;
  /** What the deciding probe saw; for a refusal, `{ error: "ECONNREFUSED" }`. */
  readonly evidence: ProbeEvidence;
  /** Clock time of the change. */
  readonly at: number;
}

export interface HealthThresholds {
  /** Consecutive probe failures that evict; DESIGN.md default 2. */
  readonly unhealthyThreshold: number;
  /** Consecutive probe successes that readmit an evicted node; DESIGN.md default 2. */
  readonly healthyThreshold: number;
}

/** A new node's evidence: nothing seen yet. One frozen object for all 20,000 at boot. */
const NO_EVIDENCE: ProbeEvidence = Object.freeze({});

/** Evidence recorded for a passive refusal; the proxy saw it, not a probe. */
const REFUSED: ProbeEvidence = Object.freeze({ error: "ECONNREFUSED (live request)" });

/**
 * The health of one node of one upstream: a pure state machine, fed probe results and refusals,
 * that returns the change (if any) each input caused. It never schedules anything itself.
 *
 * Rules (seed 000 sections 3.2 and 4.3):
 * - Only probes evict. A single failed live request never does: a timeout or reset on one request
 *   says little about the node, and layer 3 (retry on another node, breaker) covers that request.
 *   Seed 000 adds "two failures in a row before judging a node dead" to filter network blips.
 * - A refused connect on a live request is strong, cheap evidence (nothing listens), so it
 *   quarantines at once and asks for an immediate probe instead of waiting up to an interval.
 * - The confirming probe does not evict by itself: its failure counts toward
 *   `unhealthyThreshold` like any other probe failure (a failure just before the refusal counts
 *   too), and the node stays quarantined, out of rotation, meanwhile. Traffic is protected by
 *   the quarantine either way, so nothing is gained by evicting faster, while eviction is what
 *   the control plane acts on (remediation may restart the node's unit) and so stays gated by
 *   probes alone: "gated by probes" means the probe threshold, not a probe plus a request.
 * - The confirming probe's success clears the quarantine at once (no `healthyThreshold`): the
 *   node was never judged dead by probes, and the refusal may have been one restart's blink.
 */
export class NodeHealthTracker {
  private current: HealthState = "healthy";
  private failures = 0;
  private successes = 0;
  private changedAt: number;
  private evidence: ProbeEvidence = NO_EVIDENCE;
  /** Probe results older than the refusal (ticket below this) are not evidence about it. */
  private quarantineTicket = 0;

  constructor(
    readonly upstream: string,
    readonly address: string,
    private thresholds: HealthThresholds,
    private readonly clock: Clock,
  ) {
    // A new node starts healthy, in rotation: a node added by scale-out or registry
    // self-registration would otherwise wait healthyThreshold x interval (20 s by default)
    // before taking traffic, and a data plane booting would have nothing to route to until its
    // probes ran. If the node is in fact down, its first refused connect quarantines it and
    // layer 3 retries that request on another node.
    this.changedAt = clock.now();
  }

  get state(): HealthState {
    return this.current;
  }

  /** Whether the balancer may pick the node. */
  get usable(): boolean {
    return this.current === "healthy";
  }

  /** Clock time of the last change, or of creation. */
  get lastChangeAt(): number {
    return this.changedAt;
  }

  /** What the last probe (or refusal) saw. */
  get lastEvidence(): ProbeEvidence {
    return this.evidence;
  }

  /** New thresholds apply from the next probe result; the counts so far are kept. */
  setThresholds(thresholds: HealthThresholds): void {
    this.thresholds = thresholds;
  }

  /**
   * Feeds one probe result. `ticket` is the probe-now ticket the probe started under (0 for a
   * scheduled probe that started before any request); while quarantined, results that started
   * before the refusal's ticket are ignored, since they say nothing about the refusal.
   */
  probeResult(ok: boolean, evidence: ProbeEvidence, ticket: number): HealthChange | undefined {
    if (this.current === "quarantined" && ticket < this.quarantineTicket) return undefined;
    this.evidence = evidence;
    if (ok) {
      this.failures = 0;
      if (this.current === "quarantined") return this.change("healthy", "probe-cleared");
      if (this.current === "evicted") {
        this.successes += 1;
        if (this.successes >= this.thresholds.healthyThreshold) {
          return this.change("healthy", "probe-successes");
        }
      }
      return undefined;
    }
    this.successes = 0;
    if (this.current === "evicted") return undefined;
    this.failures += 1;
    if (this.failures >= this.thresholds.unhealthyThreshold) {
      return this.change("evicted", "probe-failures");
    }
    return undefined;
  }

  /**
   * A live request's connect was refused. Quarantines a healthy node and returns the change;
   * the caller must then ask for a probe with `ticket`. A node already out of rotation is left
   * as it is (returns undefined): its probes are already deciding.
   */
  refused(ticket: number): HealthChange | undefined {
    if (this.current !== "healthy") return undefined;
    this.quarantineTicket = ticket;
    this.evidence = REFUSED;
    return this.change("quarantined", "connection-refused");
  }

  private change(to: HealthState, reason: HealthChangeReason): HealthChange {
    const from = this.current;
    this.current = to;
    // Entering quarantine keeps the failure count: a probe failure just before the refusal and
    // the confirming one are consecutive probe failures.
    if (to !== "quarantined") this.failures = 0;
    this.successes = 0;
    this.changedAt = this.clock.now();
    return {
      upstream: this.upstream,
      address: this.address,
      from,
      to,
      reason,
      evidence: this.evidence,
      at: this.changedAt,
    };
  }
}
