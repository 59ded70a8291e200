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
import { type RunInTurnsOptions, runInTurns } from "../turns/run-in-turns.js";
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

/** Upstreams given their record between two points where syncInTurns may pause. */
const SYNC_STEP_UPSTREAMS = 50;

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
  /**
   * A sync not done yet: upstreams of the synced snapshot still to get their record, and the
   * records of the snapshot before, to carry over those it did not change.
   */
  #pending:
    | { readonly previous: Map<string, UpstreamRecord>; readonly rest: Iterator<CompiledUpstream> }
    | undefined;

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
    // A record a sync in progress has yet to carry over must carry over a current picker.
    const waiting = this.#pending?.previous.get(upstream);
    if (waiting !== undefined) waiting.picker = this.#usablePicker(waiting.nodes);
  }

  /**
   * The upstream's breaker, retry budget and cooldown. Defined for every upstream of the last
   * synced snapshot: one a sync in turns has not reached yet gets its record here, at once.
   */
  upstream(name: string): UpstreamHealing | undefined {
    const record = this.#upstreams.get(name);
    if (record !== undefined || this.#pending === undefined) return record;
    const compiled = this.#synced?.upstreams.get(name);
    return compiled === undefined ? undefined : this.#carry(compiled, this.#pending.previous);
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
    this.#begin(snapshot);
    this.#carryNext(Number.POSITIVE_INFINITY);
  }

  /**
   * `sync` across event-loop turns (runInTurns), for a data plane's first snapshot: 2,000 new
   * upstreams, each a breaker with its metric series and a picker over its nodes, were one
   * turn of 30 ms alone and of several hundred with ten data planes booting on two cores. It
   * takes effect at once all the same: from the call on, `upstream(name)` answers for the new
   * snapshot, making a record the turns have not reached yet when a request asks for it. A
   * later sync supersedes it. Resolves once every record is made.
   */
  async syncInTurns(snapshot: CompiledSnapshot, options: RunInTurnsOptions = {}): Promise<void> {
    this.#begin(snapshot);
    const pending = this.#pending;
    const carry = this;
    await runInTurns(
      (function* () {
        while (carry.#carryNext(SYNC_STEP_UPSTREAMS)) yield;
      })(),
      // From the next turn: the caller's is a snapshot's swap (requests get records on demand).
      { ...options, laterTurn: true, superseded: () => this.#pending !== pending },
    );
  }

  /**
   * `sync` to a snapshot compiled from a delta on `base`, the one synced last: only the upstreams
   * the delta changed (`changed`: recompiled, added or removed) get new records or lose theirs;
   * every other record, with its breaker, cooldowns and picker, stays as it is. Walking 2,000
   * upstreams to find the one a delta touched was a millisecond of every data plane's CPU per
   * change. False, doing nothing, when `base` is not what was synced last or a sync in turns
   * is still running: the caller then syncs the whole snapshot.
   */
  syncChanged(
    base: CompiledSnapshot,
    snapshot: CompiledSnapshot,
    changed: Iterable<string>,
  ): boolean {
    if (this.#synced !== base || this.#pending !== undefined) return false;
    for (const name of changed) {
      const upstream = snapshot.upstreams.get(name);
      const before = this.#upstreams.get(name);
      this.#upstreams.delete(name);
      if (upstream !== undefined) {
        this.#carry(upstream, new Map(before === undefined ? [] : [[name, before]]));
        continue;
      }
      this.breakers.forget(name);
      this.gate.forget(name);
      this.#budgets.delete(name);
      this.#keyed.delete(name);
    }
    this.#synced = snapshot;
    return true;
  }

  /** Drops what left, then points every lookup at `snapshot`; records follow in #carryNext. */
  #begin(snapshot: CompiledSnapshot): void {
    const names = [...snapshot.upstreams.keys()];
    this.breakers.retain(names);
    this.gate.retain(names);
    const keep = new Set(names);
    for (const name of this.#budgets.keys()) if (!keep.has(name)) this.#budgets.delete(name);
    for (const name of this.#keyed.keys()) if (!keep.has(name)) this.#keyed.delete(name);
    // Records of a sync still in progress are as good as those it had carried over.
    const previous = this.#pending?.previous ?? new Map<string, UpstreamRecord>();
    for (const [name, record] of this.#upstreams) previous.set(name, record);
    this.#pending = { previous, rest: snapshot.upstreams.values() };
    this.#upstreams = new Map();
    this.#synced = snapshot;
  }

  /** Makes the records of up to `count` more upstreams; false once none is left. */
  #carryNext(count: number): boolean {
    const pending = this.#pending;
    if (pending === undefined) return false;
    for (let made = 0; made < count; made++) {
      const next = pending.rest.next();
      if (next.done) {
        this.#pending = undefined;
        return false;
      }
      if (!this.#upstreams.has(next.value.name)) this.#carry(next.value, pending.previous);
    }
    return true;
  }

  /** The upstream's record for the synced snapshot: the previous one when unchanged. */
  #carry(upstream: CompiledUpstream, previous: Map<string, UpstreamRecord>): UpstreamRecord {
    const name = upstream.name;
    const before = previous.get(name);
    previous.delete(name);
    if (before?.compiled === upstream) {
      this.#upstreams.set(name, before);
      return before;
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
    const record: UpstreamRecord = {
      breaker: this.breakers.get(name, upstream.breakerPolicy ?? {}),
      budget,
      cooldown: this.gate.cooldown(name),
      nodeCooldowns: keyed.nodes,
      tenantCooldowns: keyed.tenants,
      nodes: upstream.nodes,
      picker: this.#usablePicker(upstream.nodes),
      compiled: upstream,
    };
    this.#upstreams.set(name, record);
    return record;
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
