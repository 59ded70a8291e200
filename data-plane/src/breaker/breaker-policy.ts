import { type BreakerPolicy, DEFAULT_BREAKER_POLICY } from "@clawgate/proto";

/** The policy fields a breaker reads; a generated `BreakerPolicy` message fits, so does a literal. */
export type BreakerPolicyInput = Partial<
  Pick<
    BreakerPolicy,
    | "windowMs"
    | "minRequests"
    | "failureRatio"
    | "consecutiveFailures"
    | "cooldownMs"
    | "cooldownMultiplier"
    | "maxCooldownMs"
    | "halfOpenMaxInFlight"
    | "halfOpenSuccesses"
    | "fleetProbe"
  >
>;

/** A policy with every field filled in and sane; what the breaker and its trip rules run on. */
export interface BreakerSettings {
  /** Sliding window failures are counted over; default 30 s (seed 004). */
  readonly windowMs: number;
  /** Requests the window must hold before the failure ratio counts; default 20. */
  readonly minRequests: number;
  /** Failure share in the window above which the breaker opens; default 0.6. */
  readonly failureRatio: number;
  /** Consecutive transport failures that open it at any volume; default 5. */
  readonly consecutiveFailures: number;
  /** First open period; default 30 s. */
  readonly cooldownMs: number;
  /** Each failed half-open probe multiplies the cooldown by this; default 2. */
  readonly cooldownMultiplier: number;
  /** Cap on the grown cooldown; default 300 s. */
  readonly maxCooldownMs: number;
  /** Probe requests allowed at once while half-open; default 1. */
  readonly halfOpenMaxInFlight: number;
  /** Consecutive probe successes that close it; default 2. */
  readonly halfOpenSuccesses: number;
  /** One data plane probes half-open for the fleet, the others wait for its verdict; default false. */
  readonly fleetProbe: boolean;
}

/** The shared breaker defaults (seed 004), the same the control plane fills into documents. */
export const DEFAULT_BREAKER_SETTINGS: BreakerSettings = DEFAULT_BREAKER_POLICY;

/**
 * Fills in defaults. proto3 sends an unset number as 0, and 0 is never a meaningful value for any
 * of these fields, so 0 (or anything out of range) falls back to the default rather than producing
 * a breaker that trips on nothing or never cools down.
 */
export function resolveBreakerPolicy(policy: BreakerPolicyInput = {}): BreakerSettings {
  const d = DEFAULT_BREAKER_SETTINGS;
  const cooldownMs = positive(policy.cooldownMs, d.cooldownMs);
  return {
    windowMs: positive(policy.windowMs, d.windowMs),
    minRequests: positiveInt(policy.minRequests, d.minRequests),
    failureRatio: inRange(policy.failureRatio, 0, 1, d.failureRatio),
    consecutiveFailures: positiveInt(policy.consecutiveFailures, d.consecutiveFailures),
    cooldownMs,
    cooldownMultiplier: atLeast(policy.cooldownMultiplier, 1, d.cooldownMultiplier),
    maxCooldownMs: Math.max(cooldownMs, positive(policy.maxCooldownMs, d.maxCooldownMs)),
    halfOpenMaxInFlight: positiveInt(policy.halfOpenMaxInFlight, d.halfOpenMaxInFlight),
    halfOpenSuccesses: positiveInt(policy.halfOpenSuccesses, d.halfOpenSuccesses),
    fleetProbe: policy.fleetProbe ?? d.fleetProbe,
  };
}

/** True when both settings would make a breaker behave identically. */
export function sameBreakerSettings(a: BreakerSettings, b: BreakerSettings): boolean {
  return (
    a.windowMs === b.windowMs &&
    a.minRequests === b.minRequests &&
    a.failureRatio === b.failureRatio &&
    a.consecutiveFailures === b.consecutiveFailures &&
    a.cooldownMs === b.cooldownMs &&
    a.cooldownMultiplier === b.cooldownMultiplier &&
    a.maxCooldownMs === b.maxCooldownMs &&
    a.halfOpenMaxInFlight === b.halfOpenMaxInFlight &&
    a.halfOpenSuccesses === b.halfOpenSuccesses &&
    a.fleetProbe === b.fleetProbe
  );
}

function positive(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback;
}

function positiveInt(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isInteger(value) && value > 0 ? value : fallback;
}

function inRange(value: number | undefined, min: number, max: number, fallback: number): number {
  return value !== undefined && value > min && value <= max ? value : fallback;
}

function atLeast(value: number | undefined, min: number, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value >= min ? value : fallback;
}
