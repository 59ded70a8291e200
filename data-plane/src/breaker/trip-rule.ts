import type { Clock } from "../clock/clock.js";
import type { BreakerFailure } from "./breaker-outcome.js";
import type { BreakerSettings } from "./breaker-policy.js";
import { ConsecutiveFailuresRule } from "./consecutive-failures.js";
import { SlidingWindowRule } from "./sliding-window.js";

/** Why a closed breaker opened; the `reason` of the transition event. */
export type TripReason = "consecutive_failures" | "failure_ratio";

/**
 * Decides when a closed breaker should open. It only counts; the breaker owns the state. A fresh
 * rule is made each time the breaker closes, so a rule never needs resetting.
 */
export interface TripRule {
  /** The rule that tripped last; read right after `failure` returned true. */
  readonly reason: TripReason;
  success(): void;
  /** Counts one failed request; true when the breaker should open now. */
  failure(kind: BreakerFailure): boolean;
}

/** Builds the trip rule for a closed breaker. */
export type TripRuleFactory = (settings: BreakerSettings, clock: Clock) => TripRule;

/** Trips when any of its rules trips; every rule sees every event so all counts stay true. */
export class AnyTripRule implements TripRule {
  reason: TripReason;

  constructor(private readonly rules: readonly TripRule[]) {
    if (rules.length === 0) throw new RangeError("AnyTripRule needs at least one rule");
    this.reason = rules[0]!.reason;
  }

  success(): void {
    for (const rule of this.rules) rule.success();
  }

  failure(kind: BreakerFailure): boolean {
    let tripped = false;
    for (const rule of this.rules) {
      if (rule.failure(kind) && !tripped) {
        tripped = true;
        this.reason = rule.reason;
      }
    }
    return tripped;
  }
}

/** The default: 5 consecutive transport failures, or the failure ratio over the window. */
export const defaultTripRule: TripRuleFactory = (settings, clock) =>
  new AnyTripRule([
    new ConsecutiveFailuresRule(settings.consecutiveFailures),
    new SlidingWindowRule(settings, clock),
  ]);
