import { type Clock, systemClock } from "../clock/clock.js";
import type { BreakerPolicyInput } from "./breaker-policy.js";
import {
  type BreakerStateName,
  type BreakerTransition,
  CircuitBreaker,
  type ProbeGate,
  type TransitionListener,
} from "./circuit-breaker.js";
import type { TripRuleFactory } from "./trip-rule.js";

/** What the registry reports to metrics; `BreakerMetrics` implements it. */
export interface BreakerStateSink {
  /** A breaker now exists for `upstream`, in `state`. */
  track(upstream: string, state: BreakerStateName): void;
  transition(event: BreakerTransition): void;
  /** The upstream left the snapshot; drop its series. */
  forget(upstream: string): void;
}

export interface BreakerRegistryOptions {
  /** Time source for every breaker; default `systemClock`. */
  clock?: Clock;
  /** Uniform random in [0, 1) for cooldown jitter; default Math.random. */
  random?: () => number;
  /** Largest share of a cooldown added at random; default 0.1. */
  jitterRatio?: number;
  /** Whether a stream broken after headers counts as a failure; default false. */
  countStreamBroken?: boolean;
  /** Trip rule for every breaker; default `defaultTripRule`. */
  tripRule?: TripRuleFactory;
  /** Called on every breaker's every transition (log it, journal it). */
  onTransition?: TransitionListener;
  /** Metric hooks; default none. */
  metrics?: BreakerStateSink;
  /** Fleet-wide half-open probe coordination for fleetProbe policies; default none. */
  probeGate?: ProbeGate;
}

/**
 * Breakers keyed by upstream name. It outlives snapshots: applying a new snapshot calls `get` for
 * each upstream (which updates the policy in place) and `retain` with the names still present.
 */
export class BreakerRegistry {
  private readonly breakers = new Map<string, CircuitBreaker>();
  private readonly listener: TransitionListener;

  constructor(private readonly options: BreakerRegistryOptions = {}) {
    const { onTransition, metrics } = options;
    this.listener = (event) => {
      metrics?.transition(event);
      onTransition?.(event);
    };
  }

  /** The upstream's breaker, created on first use; a changed policy is applied, state kept. */
  get(upstream: string, policy: BreakerPolicyInput): CircuitBreaker {
    const existing = this.breakers.get(upstream);
    if (existing) {
      existing.updatePolicy(policy);
      return existing;
    }
    const breaker = new CircuitBreaker({
      upstream,
      policy,
      clock: this.options.clock ?? systemClock,
      random: this.options.random,
      jitterRatio: this.options.jitterRatio,
      countStreamBroken: this.options.countStreamBroken,
      tripRule: this.options.tripRule,
      onTransition: this.listener,
      probeGate: this.options.probeGate,
    });
    this.breakers.set(upstream, breaker);
    this.options.metrics?.track(upstream, breaker.state);
    return breaker;
  }

  /** The upstream's breaker if one exists; never creates. */
  find(upstream: string): CircuitBreaker | undefined {
    return this.breakers.get(upstream);
  }

  /** Drops the breakers of upstreams not named; call after applying a snapshot. */
  retain(upstreamNames: Iterable<string>): void {
    const keep = new Set(upstreamNames);
    for (const upstream of this.breakers.keys()) {
      if (keep.has(upstream)) continue;
      this.breakers.delete(upstream);
      this.options.metrics?.forget(upstream);
    }
  }

  /** Drops one upstream's breaker (a delta removed the upstream). */
  forget(upstream: string): void {
    if (this.breakers.delete(upstream)) this.options.metrics?.forget(upstream);
  }

  get size(): number {
    return this.breakers.size;
  }

  entries(): IterableIterator<[string, CircuitBreaker]> {
    return this.breakers.entries();
  }
}
