import type { Logger } from "pino";
import type { Fleet, HealthChanges, ReportedNodeHealth } from "../fleet/fleet.js";
import type { HealAction } from "../journal/heal-event.js";
import type { Journal } from "../journal/journal.js";
import { OrderedWork } from "../turns/ordered-work.js";
import {
  INTAKE_SLICE_ENTRIES,
  intakeTurns,
  sliceAt,
  type TurnBudget,
} from "../turns/turn-budget.js";
import {
  emptyCounts,
  isNodeHealthState,
  type MajorityVerdict,
  majorityOf,
  type NodeHealthState,
  type StateCounts,
} from "./node-verdict.js";
import type { SharedHealthReports } from "./shared-health-reports.js";

/** One data plane's word on one node. */
export interface DataPlaneNodeReport {
  /** The reporting data plane's node id. */
  dataPlane: string;
  state: NodeHealthState;
  evidence: string;
  /** ISO time of the node's last state change, as that data plane saw it. */
  changedAt: string;
}

/** A node as the whole fleet of data planes sees it. */
export interface NodeHealthSummary extends StateCounts {
  upstream: string;
  address: string;
  /** Data planes reporting the node, whatever its state. */
  total: number;
  majority: MajorityVerdict;
  reports: DataPlaneNodeReport[];
}

/** The majority verdict on a node changed. */
export interface VerdictChange {
  upstream: string;
  address: string;
  previous: MajorityVerdict;
  majority: MajorityVerdict;
  /** The node now; its reports explain the verdict. */
  summary: NodeHealthSummary;
}

export type VerdictListener = (change: VerdictChange) => void;

export interface FleetHealthOptions {
  /** Fleet whose data planes' reports are read, and whose disconnects drop them; default none. */
  fleet?: Pick<Fleet, "onHealthReport" | "onChange" | "get"> &
    Partial<Pick<Fleet, "onHealthChanges">>;
  /** Records quarantine / evict / readmit as each data plane reports them; default none. */
  journal?: Pick<Journal, "record">;
  logger?: Pick<Logger, "debug" | "warn">;
  /**
   * How long a disconnected data plane's report still counts, so a stream that breaks and
   * comes back (or a control-plane restart) does not flap verdicts; default 30 s.
   */
  reconnectGraceMs?: number;
  /**
   * Shares reports between control-plane replicas through the store: a report received here is
   * written there, and the view counts what the store holds from every replica, so each replica
   * gives the same answer; default none (the view is this process's data planes, which is the
   * whole fleet when there is one replica). Call start() before relying on the view.
   */
  shared?: SharedHealthReports;
  /**
   * Each event-loop turn's share of intake work; default the control plane's one budget
   * (intakeTurns), shared with the streams that decode reports and the store writes.
   */
  turns?: TurnBudget;
}

interface StoredNode {
  upstream: string;
  address: string;
  state: NodeHealthState;
  evidence: string;
  changedAtMs: number;
}

/** Which journal action a data plane's change of a node's state is. */
function actionFor(
  previous: NodeHealthState | undefined,
  next: NodeHealthState,
): HealAction | undefined {
  if (previous === next) return undefined;
  if (next === "quarantined") return "quarantine";
  if (next === "evicted") return "evict";
  // A node first seen healthy was never out, so there is nothing to readmit.
  return previous === undefined ? undefined : "readmit";
}

function nodeKey(upstream: string, address: string): string {
  return `${upstream}\u0000${address}`;
}

function sameNode(a: StoredNode | undefined, b: StoredNode): boolean {
  return (
    a !== undefined &&
    a.state === b.state &&
    a.evidence === b.evidence &&
    a.changedAtMs === b.changedAtMs
  );
}

/**
 * The nodes of `next` that differ from `previous`, and the nodes `previous` had that `next`
 * lacks. Unchanged entries of `next` are replaced by `previous`'s, so a data plane's whole view
 * sent again keeps one object per node across reports.
 */
function* diffReports(
  previous: Map<string, StoredNode> | undefined,
  next: Map<string, StoredNode>,
): Generator<number, string[]> {
  const changed: string[] = [];
  let index = 0;
  for (const [key, node] of next) {
    if (index % INTAKE_SLICE_ENTRIES === 0) yield sliceAt(index, next.size);
    index++;
    const before = previous?.get(key);
    if (before !== undefined && sameNode(before, node)) next.set(key, before);
    else changed.push(key);
  }
  if (previous !== undefined && previous.size + changed.length > next.size) {
    for (const key of previous.keys()) if (!next.has(key)) changed.push(key);
  }
  return changed;
}

/**
 * The fleet's view of node health: each data plane's latest report (its whole view), and per
 * node how many data planes see it healthy, quarantined or evicted and what the majority says.
 * Every state change a data plane reports is journaled once, with that data plane as source, by
 * the replica that received the report (with `shared`, the others only read it).
 *
 * Each data plane's reports, drops and store hand-overs are taken in one after another, in
 * budgeted slices (issue 9: a whole 20,000-node report taken in one turn held config changes
 * back); while a report's tallies are being counted, the view already holds the report and its
 * verdicts catch up within a few turns.
 */
export class FleetHealth {
  readonly #journal: FleetHealthOptions["journal"];
  readonly #logger: FleetHealthOptions["logger"];
  readonly #fleet: FleetHealthOptions["fleet"];
  readonly #graceMs: number;
  readonly #shared: SharedHealthReports | undefined;
  /** The view: each data plane's latest report, from this replica or (shared) any replica. */
  readonly #reports = new Map<string, Map<string, StoredNode>>();
  /**
   * Shared only: the latest report of each data plane that reports to this replica. Changes are
   * journaled against it, not against the view, which lags by a store round trip.
   */
  readonly #received = new Map<string, Map<string, StoredNode>>();
  readonly #verdicts = new Map<string, MajorityVerdict>();
  /**
   * Per node, how many data planes in the view see it in each state, kept up to date report by
   * report, so a report costs what changed in it rather than nodes times data planes (issue 9:
   * recounting 20,000 nodes per report blocked the event loop for seconds).
   */
  readonly #tallies = new Map<string, StateCounts>();
  /** Shared: the parsed form of each report this replica published, to reuse when it is handed back. */
  readonly #parsed = new WeakMap<readonly ReportedNodeHealth[], Map<string, StoredNode>>();
  /**
   * Shared: the reports in #received that no other structure holds (not handed to the view nor
   * kept in #parsed), which changes-only reports may therefore update in place.
   */
  readonly #ownedReceived = new WeakSet<Map<string, StoredNode>>();
  readonly #listeners = new Set<VerdictListener>();
  readonly #updateListeners = new Set<(dataPlane: string) => void>();
  readonly #dropTimers = new Map<string, NodeJS.Timeout>();
  readonly #unsubscribe: Array<() => void> = [];
  /** Per data plane, its reports and hand-overs in the order they came, each in slices. */
  readonly #work: OrderedWork;
  /** close() was called: nothing more is taken in, journaled or told. */
  #closed = false;

  constructor(options: FleetHealthOptions = {}) {
    this.#journal = options.journal;
    this.#logger = options.logger;
    this.#fleet = options.fleet;
    this.#graceMs = options.reconnectGraceMs ?? 30_000;
    this.#shared = options.shared;
    this.#work = new OrderedWork(options.turns ?? intakeTurns, (dataPlane, error) =>
      this.#logger?.warn({ err: error, dataPlane }, "could not take in a node health report"),
    );
    const fleet = options.fleet;
    if (fleet !== undefined) {
      this.#unsubscribe.push(
        // The promises tell the stream's intake when a report is taken in: it reads no further
        // meanwhile, which is what bounds this data plane's queue here (see report()).
        fleet.onHealthReport((dataPlane, nodes) => this.report(dataPlane, nodes)),
        fleet.onHealthChanges?.(
          (dataPlane, changes) => this.#queueChanges(dataPlane, changes) || undefined,
        ) ?? (() => {}),
        fleet.onChange((dataPlane) => {
          if (dataPlane !== null) this.#followConnection(dataPlane);
        }),
      );
    }
  }

  /**
   * With `shared`, reads every replica's reports and follows the store; rejects if that first
   * read fails. Without, there is nothing to start.
   */
  async start(): Promise<void> {
    await this.#shared?.start({
      onReset: (reports) => {
        for (const dataPlane of [...this.#reports.keys()]) {
          if (!reports.has(dataPlane)) this.#work.run(dataPlane, () => this.#remove(dataPlane));
        }
        for (const report of reports.values()) this.#takeShared(report.dataPlane, report.nodes);
      },
      onReport: (report) => this.#takeShared(report.dataPlane, report.nodes),
      onGone: (dataPlane) => this.#work.run(dataPlane, () => this.#remove(dataPlane)),
      onMoved: (dataPlane) => this.#work.run(dataPlane, () => this.#moved(dataPlane)),
    });
    await this.#work.idle();
  }

  /**
   * Settles once every report, drop and hand-over taken so far is in the view (work taken in
   * meanwhile too).
   */
  settled(): Promise<void> {
    return this.#work.idle();
  }

  /** A shared report from the store into the view, in order with the data plane's other work. */
  #takeShared(dataPlane: string, nodes: readonly ReportedNodeHealth[]): void {
    this.#work.run(dataPlane, () => this.#applyShared(dataPlane, nodes));
  }

  *#applyShared(dataPlane: string, nodes: readonly ReportedNodeHealth[]): Generator<number, void> {
    yield* this.#apply(dataPlane, yield* this.#parseShared(dataPlane, nodes));
  }

  /** It reports to another replica now, which journals its changes and owns its key. */
  // biome-ignore lint/correctness/useYield: a step with no slice, in order with the data plane's others
  *#moved(dataPlane: string): Generator<number, void> {
    this.#received.delete(dataPlane);
    this.#cancelDrop(dataPlane);
  }

  /** Calls `listener` after every change of a node's majority verdict; returns the unsubscribe. */
  onVerdict(listener: VerdictListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** Calls `listener` after each change of a data plane's report in the view; returns the unsubscribe. */
  onUpdate(listener: (dataPlane: string) => void): () => void {
    this.#updateListeners.add(listener);
    return () => {
      this.#updateListeners.delete(listener);
    };
  }

  /**
   * `dataPlane` sent its whole view of node health (state of the world) to this replica:
   * journals its changes and replaces its report (shared: in the store, and the view follows).
   * Undefined when that is done at once, else a promise that settles once it is.
   *
   * This data plane's queue here is bounded by its streams, not by a bound of its own: each
   * stream's intake (HealthIntake) hands a report over only once the one before is taken in,
   * and the fleet takes reports only from a data plane's current stream. So at most one
   * report of each stream that was current when it handed it over waits here: after a
   * reconnect, the old stream's one and the new stream's; the old stream's next are dropped at
   * the hand-over. With `shared`, what comes from the store is one report per store event.
   */
  report(dataPlane: string, nodes: readonly ReportedNodeHealth[]): Promise<void> | undefined {
    return this.#work.run(dataPlane, () => this.#takeReport(dataPlane, nodes));
  }

  /** Pieces of work of `dataPlane` queued or under way: reports, drops and hand-overs. */
  queued(dataPlane: string): number {
    return this.#work.queued(dataPlane);
  }

  *#takeReport(dataPlane: string, nodes: readonly ReportedNodeHealth[]): Generator<number, void> {
    const shared = this.#shared;
    const received = this.#received.get(dataPlane);
    const previous =
      shared === undefined
        ? this.#reports.get(dataPlane)
        : (received ?? this.#reports.get(dataPlane));
    // Only what changed since the data plane's previous report is journaled, counted, stored.
    const { next, changed } = yield* this.#parseAgainst(dataPlane, nodes, previous);
    for (const [index, key] of changed.entries()) {
      if (index % INTAKE_SLICE_ENTRIES === 0) yield sliceAt(index, changed.length);
      const node = next.get(key);
      if (node === undefined) continue;
      const action = actionFor(previous?.get(key)?.state, node.state);
      if (action !== undefined) this.#journalChange(dataPlane, node, action);
    }
    if (shared === undefined) {
      if (changed.length > 0 || previous === undefined) {
        yield* this.#apply(dataPlane, next, changed);
      }
      return;
    }
    // Already shared by this replica and nothing changed: the store holds it as it is.
    if (received !== undefined && changed.length === 0) return;
    this.#received.set(dataPlane, next);
    this.#parsed.set(nodes, next);
    shared.publish(dataPlane, nodes);
  }

  /**
   * `dataPlane` sent what changed in its view since its previous report to this replica
   * (changes_only): `removed` leave first, then each node of `nodes` in order, so a node that
   * changed twice journals both transitions. The work follows the changes, not the view: its
   * report is updated in place, and only the changed nodes are tallied and reconsidered.
   * False, with a warning, when there is no report of `dataPlane` here to apply them on and
   * none is being taken in. True means taken: applied now, or queued behind that data plane's
   * work in progress (if that leaves no report to apply them on, they are dropped then, with
   * the same warning).
   */
  reportChanges(dataPlane: string, changes: HealthChanges): boolean {
    return this.#queueChanges(dataPlane, changes) !== false;
  }

  /** reportChanges, with the promise of its intake when it waits (see report()). */
  #queueChanges(dataPlane: string, changes: HealthChanges): Promise<void> | undefined | false {
    if (this.#closed) return false;
    // Behind a whole report still being taken in: it applies on that one.
    if (!this.#work.pending(dataPlane) && this.#viewOf(dataPlane) === undefined) {
      this.#warnNoView(dataPlane, changes);
      return false;
    }
    return this.#work.run(dataPlane, () => this.#takeChanges(dataPlane, changes));
  }

  /** What changes-only reports of `dataPlane` apply on: its latest report taken in here. */
  #viewOf(dataPlane: string): Map<string, StoredNode> | undefined {
    return this.#shared === undefined
      ? this.#reports.get(dataPlane)
      : this.#received.get(dataPlane);
  }

  #warnNoView(dataPlane: string, changes: HealthChanges): void {
    this.#logger?.warn(
      { dataPlane, nodes: changes.nodes.length, removed: changes.removed.length },
      "ignoring a changes-only health report: this control plane holds no whole report of that data plane to apply it on",
    );
  }

  *#takeChanges(dataPlane: string, changes: HealthChanges): Generator<number, void> {
    const shared = this.#shared;
    let view = this.#viewOf(dataPlane);
    if (view === undefined) {
      this.#warnNoView(dataPlane, changes);
      return;
    }
    if (shared !== undefined && !this.#ownedReceived.has(view)) {
      // Copied once after each whole report: that map may be the view's too (#parsed).
      view = new Map(view);
      this.#received.set(dataPlane, view);
      this.#ownedReceived.add(view);
    }
    /** Each touched node's state before this report, for the tallies. */
    const before = new Map<string, NodeHealthState | undefined>();
    /**
     * Nodes removed and back in the same report: journaled against the state they left in, as
     * the equivalent whole report (which lists them in their new state only) would be.
     */
    const left = new Map<string, NodeHealthState>();
    for (const [index, { upstream, address }] of changes.removed.entries()) {
      if (index % INTAKE_SLICE_ENTRIES === 0) yield sliceAt(index, changes.removed.length);
      const key = nodeKey(upstream, address);
      const node = view.get(key);
      if (node === undefined) continue;
      if (!before.has(key)) before.set(key, node.state);
      left.set(key, node.state);
      view.delete(key);
    }
    for (const [index, node] of changes.nodes.entries()) {
      if (index % INTAKE_SLICE_ENTRIES === 0) yield sliceAt(index, changes.nodes.length);
      if (!this.#knownState(dataPlane, node)) continue;
      const key = nodeKey(node.upstream, node.address);
      const previous = view.get(key);
      const next: StoredNode = {
        upstream: node.upstream,
        address: node.address,
        state: node.state,
        evidence: node.evidence,
        changedAtMs: Number(node.changedAtMs),
      };
      if (sameNode(previous, next)) continue;
      if (!before.has(key)) before.set(key, previous?.state);
      const from = previous?.state ?? left.get(key);
      left.delete(key);
      const action = actionFor(from, next.state);
      if (action !== undefined) this.#journalChange(dataPlane, next, action);
      view.set(key, next);
    }
    if (before.size === 0) return;
    if (shared !== undefined) {
      // The store gets the whole view, read when it is written (SharedHealthReports coalesces
      // a large view's writes); the view here follows the store, as for a whole report. A write
      // that starts between two slices of a big changes-only report stores the changes before
      // it, in order, as if they had come as two reports; this publish brings the rest.
      const received = view;
      shared.publish(dataPlane, { count: received.size, read: () => [...received.values()] });
      return;
    }
    const moved: string[] = [];
    let counted = 0;
    for (const [key, was] of before) {
      if (counted > 0 && counted % INTAKE_SLICE_ENTRIES === 0) {
        this.#reconsider(moved.splice(0));
        yield sliceAt(counted, before.size);
      }
      counted++;
      const now = view.get(key)?.state;
      if (was === now) continue;
      this.#tally(key, was, now);
      moved.push(key);
    }
    this.#reconsider(moved);
    this.#updated(dataPlane);
  }

  /**
   * Forgets `dataPlane`'s report now; its nodes' verdicts are recounted without it. Shared: this
   * replica withdraws the report it wrote, and every replica's view follows the store.
   */
  drop(dataPlane: string): void {
    if (this.#closed) return;
    this.#cancelDrop(dataPlane);
    this.#work.run(dataPlane, () => this.#takeDrop(dataPlane));
  }

  *#takeDrop(dataPlane: string): Generator<number, void> {
    const shared = this.#shared;
    if (shared === undefined) {
      yield* this.#remove(dataPlane);
      return;
    }
    this.#received.delete(dataPlane);
    shared.withdraw(dataPlane);
  }

  /**
   * `nodes` parsed, in one pass with the diff against `previous`: an unchanged node keeps its
   * previous entry, so a 20,000-node report that changes one node allocates one entry, not
   * 20,000 (their garbage was much of the cost). `changed` as diffReports gives it.
   */
  *#parseAgainst(
    dataPlane: string,
    nodes: readonly ReportedNodeHealth[],
    previous: Map<string, StoredNode> | undefined,
  ): Generator<number, { next: Map<string, StoredNode>; changed: string[] }> {
    const next = new Map<string, StoredNode>();
    const changed: string[] = [];
    for (let start = 0; start < nodes.length; start += INTAKE_SLICE_ENTRIES) {
      yield sliceAt(start, nodes.length);
      this.#parseSlice(dataPlane, nodes, start, previous, next, changed);
    }
    if (previous !== undefined && previous.size + changed.length > next.size) {
      for (const key of previous.keys()) if (!next.has(key)) changed.push(key);
    }
    return { next, changed };
  }

  /**
   * One slice of #parseAgainst, in a plain loop: in the generator itself, the per-node loop
   * cost about half again as much CPU per report.
   */
  #parseSlice(
    dataPlane: string,
    nodes: readonly ReportedNodeHealth[],
    start: number,
    previous: Map<string, StoredNode> | undefined,
    next: Map<string, StoredNode>,
    changed: string[],
  ): void {
    const end = Math.min(nodes.length, start + INTAKE_SLICE_ENTRIES);
    for (let index = start; index < end; index++) {
      const node = nodes[index] as ReportedNodeHealth;
      if (!this.#knownState(dataPlane, node)) continue;
      const key = nodeKey(node.upstream, node.address);
      const changedAtMs = Number(node.changedAtMs);
      const before = previous?.get(key);
      if (
        before !== undefined &&
        before.state === node.state &&
        before.evidence === node.evidence &&
        before.changedAtMs === changedAtMs
      ) {
        next.set(key, before);
        continue;
      }
      next.set(key, {
        upstream: node.upstream,
        address: node.address,
        state: node.state,
        evidence: node.evidence,
        changedAtMs,
      });
      changed.push(key);
    }
  }

  /** A shared report's nodes, parsed once: this replica's own come back already parsed. */
  *#parseShared(
    dataPlane: string,
    nodes: readonly ReportedNodeHealth[],
  ): Generator<number, Map<string, StoredNode>> {
    // Shared with #received: diffing only swaps entries for equal ones, so that is harmless.
    // Otherwise parsed against the view, so unchanged nodes keep their entries.
    const own = this.#parsed.get(nodes);
    if (own !== undefined) return own;
    return (yield* this.#parseAgainst(dataPlane, nodes, this.#reports.get(dataPlane))).next;
  }

  /** Puts `next` in the view; `changed` (the keys that differ from the view's) when known. */
  *#apply(
    dataPlane: string,
    next: Map<string, StoredNode>,
    changed?: readonly string[],
  ): Generator<number, void> {
    const previous = this.#reports.get(dataPlane);
    const keys = changed ?? (yield* diffReports(previous, next));
    if (previous !== undefined && keys.length === 0) return;
    this.#reports.set(dataPlane, next);
    const moved: string[] = [];
    for (const [index, key] of keys.entries()) {
      if (index % INTAKE_SLICE_ENTRIES === 0) {
        // Verdicts of the slice before, then the next slice in a turn with room.
        this.#reconsider(moved.splice(0));
        yield sliceAt(index, keys.length);
      }
      const before = previous?.get(key)?.state;
      const after = next.get(key)?.state;
      if (before === after) continue;
      this.#tally(key, before, after);
      moved.push(key);
    }
    this.#reconsider(moved);
    this.#updated(dataPlane);
  }

  *#remove(dataPlane: string): Generator<number, void> {
    const previous = this.#reports.get(dataPlane);
    if (previous === undefined) return;
    this.#reports.delete(dataPlane);
    const gone: string[] = [];
    let index = 0;
    for (const [key, node] of previous) {
      if (index % INTAKE_SLICE_ENTRIES === 0) {
        this.#reconsider(gone.splice(0));
        yield sliceAt(index, previous.size);
      }
      index++;
      this.#tally(key, node.state, undefined);
      gone.push(key);
    }
    this.#reconsider(gone);
    this.#updated(dataPlane);
  }

  /** One data plane's word on the node `key` went from `before` to `after`. */
  /** A state this control plane does not know (a newer data plane's) is skipped, said at debug. */
  #knownState(
    dataPlane: string,
    node: ReportedNodeHealth,
  ): node is ReportedNodeHealth & { state: NodeHealthState } {
    if (isNodeHealthState(node.state)) return true;
    this.#logger?.debug(
      { dataPlane, upstream: node.upstream, node: node.address, state: node.state },
      "ignoring a node health state this control plane does not know",
    );
    return false;
  }

  #tally(key: string, before: NodeHealthState | undefined, after: NodeHealthState | undefined) {
    let counts = this.#tallies.get(key);
    if (counts === undefined) {
      counts = emptyCounts();
      this.#tallies.set(key, counts);
    }
    if (before !== undefined) counts[before]--;
    if (after !== undefined) counts[after]++;
    if (counts.healthy + counts.quarantined + counts.evicted === 0) this.#tallies.delete(key);
  }

  #updated(dataPlane: string): void {
    if (this.#closed) return;
    for (const listener of this.#updateListeners) {
      try {
        listener(dataPlane);
      } catch (error) {
        this.#logger?.warn({ err: error }, "health update listener failed");
      }
    }
  }

  /** Every reported node of `upstream`, by address. */
  upstream(upstream: string): NodeHealthSummary[] {
    const addresses = new Set<string>();
    for (const report of this.#reports.values()) {
      for (const node of report.values())
        if (node.upstream === upstream) addresses.add(node.address);
    }
    return [...addresses]
      .sort()
      .map((address) => this.node(upstream, address) as NodeHealthSummary);
  }

  /** One node as the fleet sees it; undefined when no data plane reports it. */
  node(upstream: string, address: string): NodeHealthSummary | undefined {
    const key = nodeKey(upstream, address);
    const counts = emptyCounts();
    const reports: DataPlaneNodeReport[] = [];
    for (const [dataPlane, report] of this.#reports) {
      const node = report.get(key);
      if (node === undefined) continue;
      counts[node.state]++;
      reports.push({
        dataPlane,
        state: node.state,
        evidence: node.evidence,
        changedAt: new Date(node.changedAtMs).toISOString(),
      });
    }
    if (reports.length === 0) return undefined;
    reports.sort((a, b) => (a.dataPlane < b.dataPlane ? -1 : a.dataPlane > b.dataPlane ? 1 : 0));
    return {
      upstream,
      address,
      ...counts,
      total: reports.length,
      majority: majorityOf(counts),
      reports,
    };
  }

  /** Every node whose majority verdict is `verdict` now. */
  nodesWhere(verdict: MajorityVerdict): NodeHealthSummary[] {
    const out: NodeHealthSummary[] = [];
    for (const [key, current] of this.#verdicts) {
      if (current !== verdict) continue;
      const [upstream, address] = key.split("\u0000") as [string, string];
      const summary = this.node(upstream, address);
      if (summary !== undefined) out.push(summary);
    }
    return out;
  }

  /**
   * Stops following the fleet (and the store), cancels pending drops, drops the reports, drops
   * and hand-overs not yet taken in (none of them writes to the store, journals or calls a
   * listener after this call) and waits for them to end and for shared writes under way.
   * Shared reports are not withdrawn: they expire with this replica's lease unless their data
   * planes report again to another replica first.
   */
  async close(): Promise<void> {
    this.#closed = true;
    for (const off of this.#unsubscribe.splice(0)) off();
    for (const timer of this.#dropTimers.values()) clearTimeout(timer);
    this.#dropTimers.clear();
    const work = this.#work.close();
    await this.#shared?.stop();
    await work;
  }

  #followConnection(dataPlane: string): void {
    const mine = this.#shared === undefined ? this.#reports : this.#received;
    // A first report still being taken in counts: its data plane may leave meanwhile.
    if (!mine.has(dataPlane) && !this.#work.pending(dataPlane)) return;
    const view = this.#fleet?.get(dataPlane);
    if (view === undefined) {
      // The fleet forgot it: it is gone for good.
      this.drop(dataPlane);
    } else if (view.connected) {
      this.#cancelDrop(dataPlane);
    } else if (!this.#dropTimers.has(dataPlane)) {
      const timer = setTimeout(() => {
        this.#dropTimers.delete(dataPlane);
        this.drop(dataPlane);
      }, this.#graceMs);
      timer.unref();
      this.#dropTimers.set(dataPlane, timer);
    }
  }

  #cancelDrop(dataPlane: string): void {
    const timer = this.#dropTimers.get(dataPlane);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.#dropTimers.delete(dataPlane);
  }

  #reconsider(keys: Iterable<string>): void {
    const changes: VerdictChange[] = [];
    for (const key of keys) {
      const counts = this.#tallies.get(key);
      const majority = counts === undefined ? "unreported" : majorityOf(counts);
      const previous = this.#verdicts.get(key) ?? "unreported";
      if (majority === "unreported") this.#verdicts.delete(key);
      else this.#verdicts.set(key, majority);
      if (majority === previous) continue;
      // Only a node whose verdict changed is summarized, for the listeners.
      const [upstream, address] = key.split("\u0000") as [string, string];
      const summary = this.node(upstream, address);
      changes.push({
        upstream,
        address,
        previous,
        majority,
        summary: summary ?? {
          upstream,
          address,
          ...emptyCounts(),
          total: 0,
          majority,
          reports: [],
        },
      });
    }
    for (const change of changes) {
      if (this.#closed) return;
      for (const listener of this.#listeners) {
        try {
          listener(change);
        } catch (error) {
          this.#logger?.warn({ err: error }, "verdict listener failed");
        }
      }
    }
  }

  #journalChange(dataPlane: string, node: StoredNode, action: HealAction): void {
    const journal = this.#journal;
    // Also when a listener closed this view halfway through a slice.
    if (journal === undefined || this.#closed) return;
    journal
      .record({
        upstream: node.upstream,
        node: node.address,
        action,
        evidence: node.evidence === "" ? undefined : node.evidence,
        source: dataPlane,
      })
      .catch((error: unknown) => {
        this.#logger?.warn(
          { err: error, dataPlane, upstream: node.upstream, node: node.address, action },
          "could not journal a node health change",
        );
      });
  }
}
