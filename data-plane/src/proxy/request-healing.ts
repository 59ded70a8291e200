import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { SmoothWrrPicker } from "../balancer/smooth-wrr.js";
import { BreakerMetrics } from "../breaker/breaker-metrics.js";
import { BreakerRegistry } from "../breaker/breaker-registry.js";
import type {
  BreakerTransition,
  CircuitBreaker,
  ProbeGate,
  TransitionListener,
} from "../breaker/circuit-breaker.js";
import { KeyedCooldowns } from "../breaker/keyed-cooldowns.js";
import { type Cooldown, RetryAfterGate } from "../breaker/retry-after-gate.js";
import { type Clock, systemClock } from "../clock/clock.js";
import type {
  CompiledNode,
  CompiledSnapshot,
  CompiledUpstream,
} from "../compiler/compiled-types.js";
import { StaleCache, type StaleCacheOptions } from "../fallback/stale-cache.js";
import { RetryBudget, type RetryBudgetOptions } from "../retry/retry-budget.js";
import { RetryMetrics } from "./retry-metrics.js";

/** Whether the balancer may send to a node now; the handler's only view of node health. */
export type NodeUsable = (upstream: string, address: string) => boolean;
/** A live request found the node refusing connections. */
export type RefusedReport = (upstream: string, address: string) => void;
/** Subscribes to node health changes (`HealthRegistry.onChange`); returns the unsubscribe. */
export type HealthChanges = (listener: (change: { readonly upstream: string }) => void) => unknown;

/** One upstream's request-layer state, looked up once per request by upstream name. */
export interface UpstreamHealing {
  readonly breaker: CircuitBreaker;
  readonly budget: RetryBudget;
  /** The Retry-After cooldown the upstream asked for. */
  readonly cooldown: Cooldown;
  /** Cooldowns of single nodes, by address (retryAfterScope "node"). */
  readonly nodeCooldowns: KeyedCooldowns;
  /** Cooldowns of single tenants' traffic, by tenant name (retryAfterScope "tenant"). */
  readonly tenantCooldowns: KeyedCooldowns;
  /**
   * Smooth WRR over the upstream's nodes in rotation, an immutable list computed when the
   * snapshot or a node's health changes (grpc-js's picker), so a pick never looks health up.
   */
  readonly picker: SmoothWrrPicker<CompiledNode>;
}

/** The record's picker is replaced, never changed, when health changes. */
interface UpstreamRecord extends UpstreamHealing {
  picker: SmoothWrrPicker<CompiledNode>;
  readonly nodes: readonly CompiledNode[];
  /** The compiled upstream it was built from; a delta that did not touch it keeps the object. */
  readonly compiled: CompiledUpstream;
}

export interface RequestHealingOptions {
  /** Where the breaker and retry metrics are registered. */
  registry: Registry;
  /** Fleet-wide half-open probes for fleetProbe breakers (FleetProbes); default none. */
  probeGate?: ProbeGate;
  /** Breaker transitions are logged here, one line each. */
  logger: Logger;
  /** Also told every breaker transition (the control plane's breaker report); default none. */
  onBreakerTransition?: TransitionListener;
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
   * quarantine of refusing nodes), asked when a picker is built; default every node usable.
   */
  nodeUsable?: NodeUsable;
  /**
   * Where node health changes are announced (`(l) => health.onChange(l)`): each one rebuilds
   * that upstream's picker from `nodeUsable`. Default none (pickers change with snapshots only).
   */
  healthChanges?: HealthChanges;
  /** Told about refused connections (`HealthRegistry.reportRefused`); default ignored. */
  reportRefused?: RefusedReport;
}

const everyNodeUsable: NodeUsable = () => true;
const ignoreRefused: RefusedReport = () => {};

/**
 * The request layer's state that outlives snapshots (DESIGN.md "Applying a snapshot"):
 * breakers, Retry-After cooldowns, retry budgets and the stale cache, keyed by upstream. Node
 * health (eviction, quarantine) is layer 2's and lives in the HealthRegistry; this only holds
 * the hooks that read and feed it. `sync` after each applied snapshot.
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
  readonly #keyed = new Map<string, { nodes: KeyedCooldowns; tenants: KeyedCooldowns }>();
  readonly #budgetOptions: RetryBudgetOptions | undefined;
  #upstreams = new Map<string, UpstreamRecord>();
  #synced: CompiledSnapshot | undefined;

  constructor(options: RequestHealingOptions) {
    const { logger } = options;
    this.clock = options.clock ?? systemClock;
    this.breakerMetrics = new BreakerMetrics(options.registry);
    this.breakers = new BreakerRegistry({
      clock: this.clock,
      countStreamBroken: options.countStreamBroken,
      metrics: this.breakerMetrics,
      onTransition: (event) => {
        logTransition(logger, event);
        options.onBreakerTransition?.(event);
      },
      probeGate: options.probeGate,
    });
    this.gate = new RetryAfterGate(this.clock);
    this.retryMetrics = new RetryMetrics(options.registry);
    this.staleCache = new StaleCache({ ...options.staleCache, clock: this.clock });
    this.#budgetOptions = options.retryBudget;
    this.nodeUsable = options.nodeUsable ?? everyNodeUsable;
    this.reportRefused = options.reportRefused ?? ignoreRefused;
    options.healthChanges?.((change) => this.nodeHealthChanged(change.upstream));
  }

  /** A node of `upstream` entered or left rotation: its picker is rebuilt from `nodeUsable`. */
  nodeHealthChanged(upstream: string): void {
    const record = this.#upstreams.get(upstream);
    if (record !== undefined) record.picker = this.#usablePicker(record.nodes);
  }

  /**
   * The upstream's breaker, retry budget and cooldown. Defined for every upstream of the last
   * synced snapshot.
   */
  upstream(name: string): UpstreamHealing | undefined {
    return this.#upstreams.get(name);
  }

  /** `sync`s unless `snapshot` is the one synced last: one comparison per request. */
  syncWith(snapshot: CompiledSnapshot): void {
    if (snapshot !== this.#synced) this.sync(snapshot);
  }

  /**
   * Brings the registries in line with an applied snapshot: every upstream gets its breaker
   * with the policy it names now (state kept), state of upstreams that left is dropped. An
   * upstream a delta did not touch is the same compiled object (compileDelta reuses it, and
   * recompiles the upstreams of a changed breaker), so its record stays as it is: a one-route
   * change at 2,000 upstreams and 20,000 nodes rebuilt every picker, asking each node's health.
   */
  sync(snapshot: CompiledSnapshot): void {
    const names = [...snapshot.upstreams.keys()];
    this.breakers.retain(names);
    this.gate.retain(names);
    const keep = new Set(names);
    for (const name of this.#budgets.keys()) if (!keep.has(name)) this.#budgets.delete(name);
    for (const name of this.#keyed.keys()) if (!keep.has(name)) this.#keyed.delete(name);
    const upstreams = new Map<string, UpstreamRecord>();
    for (const upstream of snapshot.upstreams.values()) {
      const name = upstream.name;
      const previous = this.#upstreams.get(name);
      if (previous?.compiled === upstream) {
        upstreams.set(name, previous);
        continue;
      }
      let budget = this.#budgets.get(name);
      if (budget === undefined) {
        budget = new RetryBudget(this.#budgetOptions);
        this.#budgets.set(name, budget);
      }
      let keyed = this.#keyed.get(name);
      if (keyed === undefined) {
        keyed = { nodes: new KeyedCooldowns(this.clock), tenants: new KeyedCooldowns(this.clock) };
        this.#keyed.set(name, keyed);
      }
      upstreams.set(name, {
        breaker: this.breakers.get(name, upstream.breakerPolicy ?? {}),
        budget,
        cooldown: this.gate.cooldown(name),
        nodeCooldowns: keyed.nodes,
        tenantCooldowns: keyed.tenants,
        nodes: upstream.nodes,
        picker: this.#usablePicker(upstream.nodes),
        compiled: upstream,
      });
    }
    this.#upstreams = upstreams;
    this.#synced = snapshot;
  }

  #usablePicker(nodes: readonly CompiledNode[]): SmoothWrrPicker<CompiledNode> {
    const usable = this.nodeUsable;
    return new SmoothWrrPicker(nodes.filter((node) => usable(node.upstream, node.address)));
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
