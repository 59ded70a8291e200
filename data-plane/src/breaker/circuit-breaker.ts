import { type Clock, systemClock } from "../clock/clock.js";
import type { BreakerOutcome } from "./breaker-outcome.js";
import {
  type BreakerPolicyInput,
  type BreakerSettings,
  resolveBreakerPolicy,
  sameBreakerSettings,
} from "./breaker-policy.js";
import {
  defaultTripRule,
  type TripReason,
  type TripRule,
  type TripRuleFactory,
} from "./trip-rule.js";

export type BreakerStateName = "closed" | "half-open" | "open";

/** Leave to send one request; hand it back through `record` or `release`, exactly once. */
export interface BreakerPermit {
  readonly ok: true;
  /** True for a half-open probe; time it for `clawgate_breaker_probe_latency_ms`. */
  readonly probe: boolean;
}

export type BreakerRejectReason = "breaker_open" | "half_open_busy";

export interface BreakerRejection {
  readonly ok: false;
  readonly reason: BreakerRejectReason;
  /** How long until asking again makes sense; for the 503's Retry-After. */
  readonly retryAfterMs: number;
}

export type AcquireResult = BreakerPermit | BreakerRejection;

export type TransitionReason =
  | TripReason
  | "cooldown_elapsed"
  | "probe_failed"
  | "probes_succeeded"
  | "fleet_probe_failed"
  | "fleet_probe_succeeded";

/**
 * Coordinates half-open probes across the fleet for breakers whose policy has `fleetProbe`
 * (FleetProbes implements it): only the data plane holding the upstream's probe sends one.
 */
export interface ProbeGate {
  /** True when this data plane may probe `upstream` now; claims the probe when it may not yet. */
  mayProbe(upstream: string): boolean;
  /** This data plane's probing of `upstream` ended: closed (true) or opened again (false). */
  probed(upstream: string, success: boolean): void;
}

export interface BreakerTransition {
  readonly upstream: string;
  readonly from: BreakerStateName;
  readonly to: BreakerStateName;
  readonly reason: TransitionReason;
  /** Clock time of the transition, in ms. */
  readonly at: number;
  /** Only when `to` is "open": clock time the cooldown ends, jitter included. */
  readonly until?: number;
}

export type TransitionListener = (event: BreakerTransition) => void;

/** A read-only view for /config_dump and logs. */
export type BreakerView =
  | { readonly state: "closed" }
  | { readonly state: "open"; readonly retryAfterMs: number; readonly cooldownMs: number }
  | {
      readonly state: "half-open";
      readonly probesInFlight: number;
      readonly successes: number;
      readonly cooldownMs: number;
    };

export interface CircuitBreakerOptions {
  upstream: string;
  /** Unset or zero fields take the defaults of `DEFAULT_BREAKER_SETTINGS`. */
  policy?: BreakerPolicyInput;
  /** Time source; default `systemClock`. */
  clock?: Clock;
  /** Uniform random in [0, 1) for the cooldown jitter; default Math.random. */
  random?: () => number;
  /** Largest share of the cooldown added at random so a fleet does not probe in lockstep; default 0.1. */
  jitterRatio?: number;
  /** Whether a stream broken after headers counts as a failure; default false (seed 004). */
  countStreamBroken?: boolean;
  /** Retry-After advertised while every probe slot is taken; default 1000 ms. */
  halfOpenBusyRetryAfterMs?: number;
  /** Called once per state change, after the state changed. */
  onTransition?: TransitionListener;
  /** Builds the rule a closed breaker trips on; default `defaultTripRule`. */
  tripRule?: TripRuleFactory;
  /** Fleet-wide probe coordination, used when the policy has fleetProbe; default none. */
  probeGate?: ProbeGate;
}

type State =
  | { readonly name: "closed"; readonly rule: TripRule; readonly permit: BreakerPermit }
  | { readonly name: "open"; readonly until: number; readonly cooldownMs: number }
  | {
      readonly name: "half-open";
      readonly probes: Set<BreakerPermit>;
      successes: number;
      readonly cooldownMs: number;
    };

/**
 * A circuit breaker for one upstream. Synchronous and allocation-free on the closed path: every
 * request in one closed period shares one permit object, which is also how outcomes of requests
 * admitted before a state change are recognised as stale and ignored.
 */
export class CircuitBreaker {
  readonly upstream: string;
  private settings: BreakerSettings;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly jitterRatio: number;
  private readonly countStreamBroken: boolean;
  private readonly busyRetryAfterMs: number;
  private readonly onTransition: TransitionListener | undefined;
  private readonly tripRule: TripRuleFactory;
  private readonly probeGate: ProbeGate | undefined;
  private current: State;

  constructor(options: CircuitBreakerOptions) {
    this.upstream = options.upstream;
    this.settings = resolveBreakerPolicy(options.policy);
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.jitterRatio = options.jitterRatio ?? 0.1;
    this.countStreamBroken = options.countStreamBroken ?? false;
    this.busyRetryAfterMs = options.halfOpenBusyRetryAfterMs ?? 1_000;
    this.onTransition = options.onTransition;
    this.tripRule = options.tripRule ?? defaultTripRule;
    this.probeGate = options.probeGate;
    this.current = this.closedState();
  }

  /** The state now; reading it takes the open -> half-open step once the cooldown has passed. */
  get state(): BreakerStateName {
    return this.live().name;
  }

  get policy(): BreakerSettings {
    return this.settings;
  }

  /** Asks to send a request. Rejections are fast failures, carrying the time left. */
  acquire(): AcquireResult {
    const s = this.live();
    switch (s.name) {
      case "closed":
        return s.permit;
      case "open":
        return {
          ok: false,
          reason: "breaker_open",
          retryAfterMs: Math.max(0, Math.ceil(s.until - this.clock.now())),
        };
      case "half-open": {
        if (s.probes.size >= this.settings.halfOpenMaxInFlight || !this.mayProbe()) {
          return { ok: false, reason: "half_open_busy", retryAfterMs: this.busyRetryAfterMs };
        }
        const probe: BreakerPermit = { ok: true, probe: true };
        s.probes.add(probe);
        return probe;
      }
    }
  }

  /** Reports how the request behind `permit` ended. Stale permits are ignored. */
  record(permit: BreakerPermit, outcome: BreakerOutcome): void {
    const s = this.current;
    const neutral = outcome === "stream_broken" && !this.countStreamBroken;
    if (s.name === "closed") {
      if (permit !== s.permit || neutral) return;
      if (outcome === "success") s.rule.success();
      else if (s.rule.failure(outcome)) this.open(s.rule.reason, this.settings.cooldownMs);
      return;
    }
    if (s.name === "half-open") {
      if (!s.probes.delete(permit) || neutral) return;
      if (outcome !== "success") {
        const grown = s.cooldownMs * this.settings.cooldownMultiplier;
        this.open("probe_failed", Math.min(grown, this.settings.maxCooldownMs));
        this.probeEnded(false);
        return;
      }
      s.successes += 1;
      if (s.successes >= this.settings.halfOpenSuccesses) {
        this.close("probes_succeeded");
        this.probeEnded(true);
      }
    }
    // Open: whatever was still in flight when it opened says nothing about the next probe.
  }

  /**
   * Another data plane probed this upstream for the fleet (fleetProbe) and says how it went: a
   * success closes this breaker too, a failure opens it again with the grown cooldown, as if
   * this data plane's own probe had failed. Only a breaker still waiting (open or half-open)
   * takes a verdict; a closed one has its own evidence.
   */
  fleetVerdict(success: boolean): void {
    const s = this.current;
    if (s.name === "closed") return;
    if (success) {
      this.close("fleet_probe_succeeded");
      return;
    }
    if (s.name === "open") return;
    const grown = s.cooldownMs * this.settings.cooldownMultiplier;
    this.open("fleet_probe_failed", Math.min(grown, this.settings.maxCooldownMs));
  }

  private mayProbe(): boolean {
    if (!this.settings.fleetProbe || this.probeGate === undefined) return true;
    return this.probeGate.mayProbe(this.upstream);
  }

  /** Hands back a permit whose request was abandoned without an outcome (client gone). */
  release(permit: BreakerPermit): void {
    const s = this.current;
    if (s.name === "half-open") s.probes.delete(permit);
  }

  /**
   * Applies a new policy and keeps the state: a snapshot swap must not reset a breaker. Only a
   * change of the trip thresholds restarts the closed-state counts; an open breaker keeps its
   * deadline and a half-open one its probes.
   */
  updatePolicy(policy: BreakerPolicyInput): void {
    const next = resolveBreakerPolicy(policy);
    if (sameBreakerSettings(next, this.settings)) return;
    const previous = this.settings;
    this.settings = next;
    const s = this.current;
    if (
      s.name === "closed" &&
      (previous.windowMs !== next.windowMs ||
        previous.minRequests !== next.minRequests ||
        previous.failureRatio !== next.failureRatio ||
        previous.consecutiveFailures !== next.consecutiveFailures)
    ) {
      this.current = { name: "closed", rule: this.tripRule(next, this.clock), permit: s.permit };
    }
  }

  inspect(): BreakerView {
    const s = this.live();
    switch (s.name) {
      case "closed":
        return { state: "closed" };
      case "open":
        return {
          state: "open",
          retryAfterMs: Math.max(0, Math.ceil(s.until - this.clock.now())),
          cooldownMs: s.cooldownMs,
        };
      case "half-open":
        return {
          state: "half-open",
          probesInFlight: s.probes.size,
          successes: s.successes,
          cooldownMs: s.cooldownMs,
        };
    }
  }

  private live(): State {
    const s = this.current;
    if (s.name === "open" && this.clock.now() >= s.until) this.halfOpen(s.cooldownMs);
    return this.current;
  }

  private open(reason: TransitionReason, cooldownMs: number): void {
    const at = this.clock.now();
    const jitter = 1 + this.random() * this.jitterRatio;
    const until = at + cooldownMs * jitter;
    const from = this.current.name;
    this.current = { name: "open", until, cooldownMs };
    this.onTransition?.({ upstream: this.upstream, from, to: "open", reason, at, until });
  }

  /** This data plane's own probing ended: the fleet learns the verdict from it. */
  private probeEnded(success: boolean): void {
    if (this.settings.fleetProbe) this.probeGate?.probed(this.upstream, success);
  }

  /** Closing forgets the grown cooldown: the next trip starts again from `cooldownMs`. */
  private close(reason: TransitionReason): void {
    const from = this.current.name;
    this.current = this.closedState();
    this.emit(from, "closed", reason);
  }

  private halfOpen(cooldownMs: number): void {
    this.current = { name: "half-open", probes: new Set(), successes: 0, cooldownMs };
    this.emit("open", "half-open", "cooldown_elapsed");
  }

  private closedState(): State {
    return {
      name: "closed",
      rule: this.tripRule(this.settings, this.clock),
      permit: Object.freeze({ ok: true, probe: false }),
    };
  }

  private emit(from: BreakerStateName, to: BreakerStateName, reason: TransitionReason): void {
    this.onTransition?.({ upstream: this.upstream, from, to, reason, at: this.clock.now() });
  }
}
