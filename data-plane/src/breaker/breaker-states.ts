import { BreakerPhase } from "@clawgate/proto";
import type { BreakerStateInit } from "../snapshot-client/snapshot-client.js";
import type { BreakerStateName, BreakerTransition } from "./circuit-breaker.js";

const PHASES: Record<BreakerStateName, BreakerPhase> = {
  closed: BreakerPhase.CLOSED,
  open: BreakerPhase.OPEN,
  "half-open": BreakerPhase.HALF_OPEN,
};

/**
 * The breakers that are not closed, as the control plane is told of them (BreakerReport), kept
 * from the breakers' transition events rather than read from the breakers: reading a breaker's
 * state takes its open -> half-open step, which only a request should do.
 */
export class BreakerStates {
  readonly #states = new Map<string, BreakerStateInit>();

  /** Records one transition; a breaker that closed is no longer listed. */
  transition(event: BreakerTransition): void {
    if (event.to === "closed") {
      this.#states.delete(event.upstream);
      return;
    }
    this.#states.set(event.upstream, {
      upstream: event.upstream,
      phase: PHASES[event.to],
      sinceMs: BigInt(Math.round(event.at)),
      cooldownUntilMs: BigInt(Math.round(event.to === "open" ? (event.until ?? 0) : 0)),
    });
  }

  /**
   * The report: every breaker not closed whose upstream `exists` still (an upstream dropped
   * from the config takes its breaker with it).
   */
  report(exists: (upstream: string) => boolean): BreakerStateInit[] {
    for (const upstream of this.#states.keys()) {
      if (!exists(upstream)) this.#states.delete(upstream);
    }
    return [...this.#states.values()];
  }
}
