import type { BreakerFailure } from "./breaker-outcome.js";
import type { TripReason, TripRule } from "./trip-rule.js";

/**
 * Trips after `threshold` transport failures in a row, at any volume: a dead upstream is caught
 * in a handful of requests instead of waiting for the window's minimum (seed 004).
 */
export class ConsecutiveFailuresRule implements TripRule {
  readonly reason: TripReason = "consecutive_failures";
  private count = 0;

  /** @param threshold transport failures in a row that trip; the policy default is 5. */
  constructor(private readonly threshold: number) {}

  success(): void {
    this.count = 0;
  }

  failure(kind: BreakerFailure): boolean {
    // A 5xx proves the upstream is reachable, so it does not extend the chain; but it is no
    // success either, so it does not break it: refused, 503, refused... is still an outage.
    if (kind !== "transport") return false;
    this.count += 1;
    return this.count >= this.threshold;
  }
}
