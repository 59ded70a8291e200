import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { BreakerStateSink } from "./breaker-registry.js";
import type { BreakerStateName, BreakerTransition } from "./circuit-breaker.js";

/** The gauge's encoding, fixed by DESIGN.md. */
export const BREAKER_STATE_VALUE: Readonly<Record<BreakerStateName, number>> = Object.freeze({
  closed: 0,
  "half-open": 1,
  open: 2,
});

const STATES: readonly BreakerStateName[] = ["closed", "half-open", "open"];

type UpstreamCounter = ReturnType<Counter<"upstream">["labels"]>;

/**
 * The breaker metrics named in DESIGN.md. Hand it to `BreakerRegistry` for state and transitions;
 * the proxy calls `rejected`, `probeLatency` and `retryAfterSkip` itself.
 */
export class BreakerMetrics implements BreakerStateSink {
  private readonly state: Gauge<"upstream">;
  private readonly transitions: Counter<"upstream" | "from" | "to">;
  private readonly rejections: Counter<"upstream">;
  private readonly probeLatencyMs: Histogram<string>;
  private readonly retryAfterSkips: Counter<"upstream">;
  // Label children cached per upstream: the two fast-fail counters run once per request during
  // an outage, and `inc({ upstream })` would hash the labels every time.
  private readonly rejectionChildren = new Map<string, UpstreamCounter>();
  private readonly retryAfterSkipChildren = new Map<string, UpstreamCounter>();

  constructor(registry: Registry) {
    const registers = [registry];
    this.state = new Gauge({
      name: "clawgate_breaker_state",
      help: "Circuit breaker state per upstream: 0 closed, 1 half-open, 2 open.",
      labelNames: ["upstream"],
      registers,
      // With workers each has its own breaker, and /metrics shows the most open one: 2 when
      // any worker fails requests fast, which is what an alert on `== 2` means to catch. A sum
      // would read two half-open workers as open (2) and leave the 0-2 scale.
      aggregator: "max",
    });
    this.transitions = new Counter({
      name: "clawgate_breaker_transitions_total",
      help: "Circuit breaker state changes.",
      labelNames: ["upstream", "from", "to"],
      registers,
    });
    this.rejections = new Counter({
      name: "clawgate_breaker_rejections_total",
      help: "Requests failed fast because the upstream's breaker was open or its probe slot taken.",
      labelNames: ["upstream"],
      registers,
    });
    this.probeLatencyMs = new Histogram({
      name: "clawgate_breaker_probe_latency_ms",
      help: "Duration of half-open probe requests in milliseconds.",
      buckets: [25, 50, 100, 250, 500, 1000, 2000],
      registers,
    });
    this.retryAfterSkips = new Counter({
      name: "clawgate_breaker_retry_after_skips_total",
      help: "Requests not sent because the upstream's Retry-After cooldown was still running.",
      labelNames: ["upstream"],
      registers,
    });
  }

  track(upstream: string, state: BreakerStateName): void {
    this.state.set({ upstream }, BREAKER_STATE_VALUE[state]);
  }

  transition(event: BreakerTransition): void {
    this.state.set({ upstream: event.upstream }, BREAKER_STATE_VALUE[event.to]);
    this.transitions.inc({ upstream: event.upstream, from: event.from, to: event.to });
  }

  /** Removes every series of an upstream gone from the snapshot, so label sets do not pile up. */
  forget(upstream: string): void {
    this.state.remove({ upstream });
    // A cached child outlives `remove`; drop it too, or a returning upstream counts into nothing.
    this.rejections.remove({ upstream });
    this.rejectionChildren.delete(upstream);
    this.retryAfterSkips.remove({ upstream });
    this.retryAfterSkipChildren.delete(upstream);
    for (const from of STATES) {
      for (const to of STATES) this.transitions.remove({ upstream, from, to });
    }
  }

  /** A request failed fast on the breaker (`acquire` returned ok: false). */
  rejected(upstream: string): void {
    let child = this.rejectionChildren.get(upstream);
    if (child === undefined) {
      child = this.rejections.labels({ upstream });
      this.rejectionChildren.set(upstream, child);
    }
    child.inc();
  }

  /** A probe (`permit.probe`) finished after `ms` milliseconds. */
  probeLatency(ms: number): void {
    this.probeLatencyMs.observe(ms);
  }

  /** A request was not sent because `RetryAfterGate.check` said wait. */
  retryAfterSkip(upstream: string): void {
    let child = this.retryAfterSkipChildren.get(upstream);
    if (child === undefined) {
      child = this.retryAfterSkips.labels({ upstream });
      this.retryAfterSkipChildren.set(upstream, child);
    }
    child.inc();
  }
}
