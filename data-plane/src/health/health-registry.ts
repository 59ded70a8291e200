import { setImmediate as nextTurn } from "node:timers/promises";
import type { NodeHealth } from "@clawgate/proto";
import type { Logger } from "pino";
import { type Clock, systemClock } from "../clock/clock.js";
import { HealthChangeLog, type HealthChanges } from "./health-change-log.js";
import { HealthLog } from "./health-log.js";
import type { HealthSink } from "./health-metrics.js";
import { type HealthTarget, healthCheckSettings } from "./health-targets.js";
import { type HealthChange, type HealthState, NodeHealthTracker } from "./node-health.js";
import {
  formatEvidence,
  type ProbeEvidence,
  type ProbeResult,
  type ProbeTarget,
} from "./prober/probe-protocol.js";
import { type Prober, type ProberFactory, ProbeWorker } from "./prober/probe-worker-client.js";

/** Default longest stretch of syncing nodes before the event loop runs again. */
export const SYNC_TURN_MS = 10;

/**
 * A sync of more nodes than this starts on the next turn rather than in the caller's: the
 * caller is the turn of a snapshot's swap, which has steps of its own to run, and a first
 * snapshot's first slice of nodes made that turn the longest of the boot.
 */
export const SYNC_AT_ONCE_NODES = 500;

interface ReportedNode {
  readonly changedAt: number;
  readonly state: HealthState;
  readonly evidence: ProbeEvidence;
  readonly message: NodeHealth;
}

function nodeHealth(
  upstream: string,
  address: string,
  state: HealthState,
  tracker: NodeHealthTracker,
): NodeHealth {
  // A literal rather than create(): the same message, without reflection over its fields,
  // built for every node of a 20,000-node report at boot.
  return {
    $typeName: "clawgate.v1.NodeHealth",
    upstream,
    address,
    state,
    evidence: formatEvidence(tracker.lastEvidence),
    changedAtMs: BigInt(Math.trunc(tracker.lastChangeAt)),
  };
}

export type HealthChangeListener = (change: HealthChange) => void;

export interface HealthRegistryOptions {
  /** Time source for state changes; default `systemClock`. */
  clock?: Clock;
  /** Builds the prober; default a `ProbeWorker` (probes on their own worker thread). */
  prober?: ProberFactory;
  /** Metric hooks (`HealthMetrics`); default none. */
  metrics?: HealthSink;
  /** State changes (a burst summarized, see `HealthLog`) and prober crashes; default none. */
  logger?: Logger;
  /** Sync nodes for about this long, then let the event loop run; default `SYNC_TURN_MS`. */
  syncTurnMs?: number;
  /** Clock in ms for `syncTurnMs`; default performance.now. */
  turnClock?: () => number;
  /** DNS servers the probes resolve node names with (dnsServers); default the system's. */
  dnsServers?: readonly string[];
  /** Most changes kept between two reports before the next must be whole; default 50,000. */
  changeLogLimit?: number;
}

/**
 * Node health keyed by upstream and node address. It outlives snapshots: each applied snapshot
 * calls `sync` with its nodes, and a reload neither readmits an evicted node nor resets counts.
 * Probes run in a worker; this side only folds their results into each node's state machine.
 */
export class HealthRegistry {
  private readonly nodes = new Map<string, Map<string, NodeHealthTracker>>();
  /** Upstreams whose nodes are watched (or being synced), so `sync` can tell which are gone. */
  private readonly watched = new Set<string>();
  /** Upstreams still to sync, each with its latest list; drained a turn at a time. */
  private readonly pending = new Map<string, readonly HealthTarget[]>();
  private draining = false;
  private readonly syncedWaiters: (() => void)[] = [];
  private readonly listeners = new Set<HealthChangeListener>();
  /** Each node's last reported entry, kept while its state has not changed since. */
  private readonly reported = new WeakMap<NodeHealthTracker, ReportedNode>();
  private readonly clock: Clock;
  private readonly prober: Prober;
  private readonly log: HealthLog | undefined;
  private nextTicket = 1;
  private closed = false;
  /** Watched nodes out of rotation; kept in step with every state change and removal. */
  private unusable = 0;
  /** What changed since the last report, for changes-only reports (`takeChanges`). */
  private readonly changes: HealthChangeLog;

  constructor(private readonly options: HealthRegistryOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.log = options.logger && new HealthLog({ logger: options.logger });
    this.changes = new HealthChangeLog(options.changeLogLimit);
    const onResults = (results: readonly ProbeResult[]) => this.onProbeResults(results);
    this.prober =
      options.prober?.(onResults) ??
      new ProbeWorker({
        onResults,
        onError: (err) => options.logger?.error({ err }, "probe worker failed"),
        ...(options.dnsServers === undefined ? {} : { dnsServers: options.dnsServers }),
      });
  }

  /**
   * Makes the watched nodes those of `targets` (every node of the applied snapshot): new nodes
   * start healthy and are probed, gone nodes stop and their state is dropped, nodes kept keep
   * their state even when their health check changed (new settings apply from the next probe).
   */
  sync(targets: Iterable<HealthTarget>): void {
    if (this.closed) return;
    const byUpstream = new Map<string, HealthTarget[]>();
    for (const target of targets) {
      const list = byUpstream.get(target.upstream);
      if (list === undefined) byUpstream.set(target.upstream, [target]);
      else list.push(target);
    }
    for (const upstream of this.watched) {
      if (!byUpstream.has(upstream)) byUpstream.set(upstream, []);
    }
    this.syncUpstreams(byUpstream);
  }

  /**
   * `sync` for the named upstreams only: each one's watched nodes become its list (empty: the
   * upstream is gone), every other upstream is left as it is. A snapshot that changes a few
   * upstreams of 2,000 costs those few, not a walk over every node.
   */
  syncUpstreams(changes: ReadonlyMap<string, readonly HealthTarget[]>): void {
    if (this.closed || changes.size === 0) return;
    let nodes = 0;
    for (const [upstream, targets] of changes) {
      // Re-inserted at the end: the latest list of an upstream is the one synced.
      this.pending.delete(upstream);
      this.pending.set(upstream, targets);
      if (targets.length > 0) this.watched.add(upstream);
      nodes += targets.length;
    }
    if (this.draining) return;
    if (nodes <= SYNC_AT_ONCE_NODES) this.drain();
    else this.drainNextTurn();
  }

  /**
   * Resolves once every upstream given to `sync`/`syncUpstreams` so far is synced (at once when
   * nothing is pending).
   */
  synced(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.syncedWaiters.push(resolve));
  }

  /**
   * Syncs pending upstreams for about `syncTurnMs`, hands their nodes to the prober, and leaves
   * the rest to the next turn. A first snapshot of 20,000 nodes builds a state machine and a
   * metric series per node; in one turn that blocked the proxy's clients for hundreds of ms.
   * Meanwhile a node not synced yet is usable (like any new node) and a removed one keeps its
   * last state until its upstream's turn comes. A small change (up to
   * SYNC_AT_ONCE_NODES nodes) finishes in the call itself; a bigger one starts on the next turn.
   */
  private drain(): void {
    const clock = this.options.turnClock ?? (() => performance.now());
    const turnMs = this.options.syncTurnMs ?? SYNC_TURN_MS;
    const started = clock();
    const probeChanges = new Map<string, ProbeTarget[]>();
    for (const [upstream, targets] of this.pending) {
      this.pending.delete(upstream);
      probeChanges.set(upstream, this.syncUpstream(upstream, targets));
      if (clock() - started >= turnMs) break;
    }
    this.prober.setUpstreams(probeChanges);
    if (this.pending.size > 0) {
      this.drainNextTurn();
      return;
    }
    for (const resolve of this.syncedWaiters.splice(0)) resolve();
  }

  private drainNextTurn(): void {
    this.draining = true;
    setImmediate(() => {
      this.draining = false;
      if (!this.closed) this.drain();
    });
  }

  /** Makes the upstream's watched nodes `targets`; returns what its prober list becomes. */
  private syncUpstream(upstream: string, targets: readonly HealthTarget[]): ProbeTarget[] {
    const keep = new Set<string>();
    const probeTargets: ProbeTarget[] = [];
    let byAddress = this.nodes.get(upstream);
    // An upstream's nodes share its health check (healthTargets passes one object): its
    // settings are filled and frozen once, not once per node (20,000 objects at boot).
    let checkOf: HealthTarget["healthCheck"] | null = null;
    let settings = healthCheckSettings(undefined);
    for (const target of targets) {
      if (target.healthCheck !== checkOf) {
        checkOf = target.healthCheck;
        settings = healthCheckSettings(checkOf);
      }
      probeTargets.push({
        upstream,
        address: target.address,
        host: target.host,
        port: target.port,
        intervalMs: settings.intervalMs,
        timeoutMs: settings.timeoutMs,
        path: settings.path,
        expectStatus: settings.expectStatus,
        tls: target.tls,
      });
      keep.add(target.address);
      if (byAddress === undefined) {
        byAddress = new Map();
        this.nodes.set(upstream, byAddress);
      }
      const existing = byAddress.get(target.address);
      if (existing !== undefined) {
        existing.setThresholds(settings);
        continue;
      }
      const tracker = new NodeHealthTracker(upstream, target.address, settings, this.clock);
      byAddress.set(target.address, tracker);
      this.options.metrics?.track(upstream, target.address, tracker.state);
      this.changes.changed(
        upstream,
        target.address,
        "absent",
        nodeHealth(upstream, target.address, tracker.state, tracker),
      );
    }
    if (byAddress !== undefined) {
      for (const [address, tracker] of byAddress) {
        if (keep.has(address)) continue;
        if (!tracker.usable) this.unusable -= 1;
        byAddress.delete(address);
        this.changes.removed(upstream, address, tracker.state);
        this.options.metrics?.forget(upstream, address);
      }
      if (byAddress.size === 0) this.nodes.delete(upstream);
    }
    if (probeTargets.length === 0) this.watched.delete(upstream);
    return probeTargets;
  }

  /**
   * Whether the balancer may pick the node: two Map reads, for the skip predicate on every pick.
   * A node the registry does not know (not synced yet) is usable, like a new node.
   */
  isUsable(upstream: string, address: string): boolean {
    return this.nodes.get(upstream)?.get(address)?.usable ?? true;
  }

  /**
   * How many watched nodes are out of rotation, in O(1). While it is 0 the proxy picks without
   * a skip predicate, so a healthy fleet never pays `isUsable` per node per pick.
   */
  get unusableCount(): number {
    return this.unusable;
  }

  /** The node's state, or undefined when it is not watched. */
  state(upstream: string, address: string): HealthState | undefined {
    return this.nodes.get(upstream)?.get(address)?.state;
  }

  /**
   * A live request's connection to the node was refused (the passive signal from the proxy).
   * A healthy node is quarantined at once and probed now; otherwise nothing changes.
   */
  reportRefused(upstream: string, address: string): void {
    if (this.closed) return;
    const tracker = this.nodes.get(upstream)?.get(address);
    if (tracker === undefined) return;
    const ticket = this.nextTicket++;
    const change = tracker.refused(ticket);
    if (change === undefined) return;
    this.prober.probeNow(upstream, address, ticket);
    this.emit(change, tracker);
  }

  /** Calls `listener` on every state change; returns the unsubscribe function. */
  onChange(listener: HealthChangeListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /**
   * Every watched node, for a whole NodeHealthReport, in one turn; what changes after it is
   * what `takeChanges` gives next. With `held`, that node is reported in `held.from`, the state
   * it just left (see `HealthReportPacer`).
   */
  snapshot(held?: HealthChange): NodeHealth[] {
    this.changes.restart();
    const report: NodeHealth[] = [];
    for (const [upstream, byAddress] of this.nodes) {
      const heldHere = held?.upstream === upstream ? held : undefined;
      for (const [address, tracker] of byAddress) {
        if (heldHere?.address === address) {
          report.push(nodeHealth(upstream, address, heldHere.from, tracker));
          continue;
        }
        report.push(this.entry(upstream, address, tracker));
      }
    }
    return report;
  }

  /**
   * Every watched node as it was when called, built about `syncTurnMs` at a time so a view of
   * 20,000 nodes does not hold the event loop (the whole view a data plane sends after each
   * Hello). A node that changed meanwhile is reported in its state at the start and a node added
   * meanwhile not at all: `takeChanges` gives what changed since the start, on top of this view.
   */
  async snapshotInTurns(): Promise<NodeHealth[]> {
    this.changes.restart();
    const clock = this.options.turnClock ?? (() => performance.now());
    const turnMs = this.options.syncTurnMs ?? SYNC_TURN_MS;
    const report: NodeHealth[] = [];
    let started = clock();
    for (const upstream of [...this.nodes.keys()]) {
      if (clock() - started >= turnMs) {
        await nextTurn();
        started = clock();
      }
      // Gone meanwhile: its nodes' removals are in the change log.
      const byAddress = this.nodes.get(upstream);
      if (byAddress === undefined) continue;
      for (const [address, tracker] of byAddress) {
        const before = this.changes.stateAtStart(upstream, address);
        if (before === undefined) report.push(this.entry(upstream, address, tracker));
        else if (before !== "absent") report.push(nodeHealth(upstream, address, before, tracker));
      }
    }
    return report;
  }

  /**
   * What changed since the last `snapshot`, `snapshotInTurns` or `takeChanges`, in order (a
   * changes-only report); undefined when too much changed to keep (send a whole view instead).
   */
  takeChanges(): HealthChanges | undefined {
    return this.changes.take();
  }

  /** The node's report entry, built again only when its state changed since the last report. */
  private entry(upstream: string, address: string, tracker: NodeHealthTracker): NodeHealth {
    // A report of 20,000 nodes is sent whenever one changes: each node's entry is built
    // again only when its own state changed, so the sender can reuse its encoding too.
    const cached = this.reported.get(tracker);
    if (
      cached !== undefined &&
      cached.changedAt === tracker.lastChangeAt &&
      cached.state === tracker.state &&
      cached.evidence === tracker.lastEvidence
    ) {
      return cached.message;
    }
    const message = nodeHealth(upstream, address, tracker.state, tracker);
    this.reported.set(tracker, {
      changedAt: tracker.lastChangeAt,
      state: tracker.state,
      evidence: tracker.lastEvidence,
      message,
    });
    return message;
  }

  /** Stops probing; the registry answers `isUsable` from its last state afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.listeners.clear();
    this.pending.clear();
    for (const resolve of this.syncedWaiters.splice(0)) resolve();
    this.log?.flush();
    await this.prober.close();
  }

  private onProbeResults(results: readonly ProbeResult[]): void {
    for (const result of results) {
      if (this.closed) return;
      const tracker = this.nodes.get(result.upstream)?.get(result.address);
      // A node removed by sync while its probe ran: the result is about nothing we watch.
      if (tracker === undefined) continue;
      this.options.metrics?.probe(result.upstream, result.address, result.ok, result.durationMs);
      const change = tracker.probeResult(result.ok, result.evidence, result.ticket);
      if (change !== undefined) this.emit(change, tracker);
    }
  }

  private emit(change: HealthChange, tracker: NodeHealthTracker): void {
    // Only "healthy" is usable, so only changes into or out of it move the count.
    if (change.from === "healthy") this.unusable += 1;
    else if (change.to === "healthy") this.unusable -= 1;
    // Before the listeners: the pacer among them may report at once, this change included.
    this.changes.changed(
      change.upstream,
      change.address,
      change.from,
      nodeHealth(change.upstream, change.address, change.to, tracker),
    );
    this.options.metrics?.change(change);
    this.log?.change(change);
    for (const listener of this.listeners) {
      try {
        listener(change);
      } catch (err) {
        // A listener's bug must not stop the state machine or the other listeners.
        this.options.logger?.error({ err }, "health change listener threw");
      }
    }
  }
}
