import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { BreakerMetrics } from "../breaker/breaker-metrics.js";
import { BreakerRegistry } from "../breaker/breaker-registry.js";
import type { BreakerTransition } from "../breaker/circuit-breaker.js";
import { RetryAfterGate } from "../breaker/retry-after-gate.js";
import { type Clock, systemClock } from "../clock/clock.js";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { StaleCache, type StaleCacheOptions } from "../fallback/stale-cache.js";
import { RetryBudget, type RetryBudgetOptions } from "../retry/retry-budget.js";
import { RetryMetrics } from "./retry-metrics.js";

/** Whether the balancer may send to a node now; the handler's only view of node health. */
export type NodeUsable = (upstream: string, address: string) => boolean;
/** A live request found the node refusing connections. */
export type RefusedReport = (upstream: string, address: string) => void;

export interface RequestHealingOptions {
  /** Where the breaker and retry metrics are registered. */
  registry: Registry;
  /** Breaker transitions are logged here, one line each. */
  logger: Logger;
  /** Time source of breakers, Retry-After cooldowns and cache ages; default systemClock. */
  clock?: Clock;
  /** Per-upstream retry budget; default 20 % of active requests, at least 3 retries at once. */
  retryBudget?: RetryBudgetOptions;
  /** Bounds of the stale-if-error cache; defaults in StaleCacheOptions. */
  staleCache?: Omit<StaleCacheOptions, "clock">;
  /** Whether a stream broken after headers counts against the breaker; default false (seed 004). */
  countStreamBroken?: boolean;
  /**
   * Node health as the balancer sees it (`HealthRegistry.isUsable`: probe-gated eviction and the
   * quarantine of refusing nodes); default every node usable.
   */
  nodeUsable?: NodeUsable;
  /** Told about refused connections (`HealthRegistry.reportRefused`); default ignored. */
  reportRefused?: RefusedReport;
}

const everyNodeUsable: NodeUsable = () => true;
const ignoreRefused: RefusedReport = () => {};

/**
 * The request layer's state that outlives snapshots (DESIGN.md "Applying a snapshot"):
 * breakers, Retry-After cooldowns, retry budgets and the stale cache, keyed by upstream. Node
 * health (eviction, quarantine) is layer 2's and lives in the HealthRegistry; this only holds
 * the two hooks that read and feed it. `sync` after each applied snapshot.
 */
export class RequestHealing {
  readonly clock: Clock;
  readonly breakers: BreakerRegistry;
  readonly breakerMetrics: BreakerMetrics;
  readonly gate: RetryAfterGate;
  readonly retryMetrics: RetryMetrics;
  readonly staleCache: StaleCache;
  readonly nodeUsable: NodeUsable;
  readonly reportRefused: RefusedReport;
  readonly #budgets = new Map<string, RetryBudget>();
  readonly #budgetOptions: RetryBudgetOptions | undefined;

  constructor(options: RequestHealingOptions) {
    const { logger } = options;
    this.clock = options.clock ?? systemClock;
    this.breakerMetrics = new BreakerMetrics(options.registry);
    this.breakers = new BreakerRegistry({
      clock: this.clock,
      countStreamBroken: options.countStreamBroken,
      metrics: this.breakerMetrics,
      onTransition: (event) => logTransition(logger, event),
    });
    this.gate = new RetryAfterGate(this.clock);
    this.retryMetrics = new RetryMetrics(options.registry);
    this.staleCache = new StaleCache({ ...options.staleCache, clock: this.clock });
    this.#budgetOptions = options.retryBudget;
    this.nodeUsable = options.nodeUsable ?? everyNodeUsable;
    this.reportRefused = options.reportRefused ?? ignoreRefused;
  }

  /** The upstream's retry budget, created on first use. */
  budget(upstream: string): RetryBudget {
    let budget = this.#budgets.get(upstream);
    if (budget === undefined) {
      budget = new RetryBudget(this.#budgetOptions);
      this.#budgets.set(upstream, budget);
    }
    return budget;
  }

  /**
   * Brings the registries in line with an applied snapshot: every upstream gets its breaker
   * with the policy it names now (state kept), state of upstreams that left is dropped.
   */
  sync(snapshot: CompiledSnapshot): void {
    const names = [...snapshot.upstreams.keys()];
    for (const upstream of snapshot.upstreams.values()) {
      this.breakers.get(upstream.name, upstream.breakerPolicy ?? {});
    }
    this.breakers.retain(names);
    this.gate.retain(names);
    const keep = new Set(names);
    for (const name of this.#budgets.keys()) if (!keep.has(name)) this.#budgets.delete(name);
  }
}

function logTransition(logger: Logger, event: BreakerTransition): void {
  const line = {
    upstream: event.upstream,
    from: event.from,
    to: event.to,
    reason: event.reason,
    ...(event.until === undefined ? {} : { openForMs: Math.ceil(event.until - event.at) }),
  };
  const message = `breaker ${event.from} -> ${event.to}`;
  if (event.to === "open") logger.warn(line, message);
  else logger.info(line, message);
}
