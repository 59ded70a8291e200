import type { Logger } from "pino";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { monotonicScheduler, type Scheduler } from "../remediation/scheduler.js";
import { Informer, type InformerBatch, type InformerChange } from "../store/informer.js";
import { isLeaseGone } from "../store/lease-gone.js";
import type { KeyValue, Store } from "../store/store.js";
import { healthReportKey, healthReportPrefix, parseHealthReportKey } from "./health-report-key.js";
import {
  encodeHealthReport,
  HealthReportTooLarge,
  type ParsedHealthReport,
  parseHealthReport,
  type SharedHealthReport,
} from "./stored-health-report.js";

export interface SharedHealthReportsOptions {
  store: Store;
  /** Key prefix with its trailing slash (e.g. "/clawgate/"); reports go under `{prefix}meta/health/`. */
  prefix: string;
  /** This replica's id, written into every report it receives (the instance id). */
  replicaId: string;
  /**
   * TTL of the lease this replica binds its data planes' reports to: how long they outlive a
   * replica that died (its data planes report again wherever they reconnect); default 10 s.
   */
  leaseTtlSeconds?: number;
  /** At most one write per data plane per this many ms; the newest report wins; default 100. */
  coalesceMs?: number;
  /**
   * A large view waits longer between writes: one of N nodes waits at least N divided by this
   * per second (20,000 nodes: 5 s); default WRITE_NODES_PER_SECOND.
   */
  writeNodesPerSecond?: number;
  /**
   * Delay before retrying a failed write, and the first delay before re-reading after a failed
   * watch (backing off to 5 s); default 1000 ms.
   */
  retryMs?: number;
  logger?: Pick<Logger, "debug" | "info" | "warn">;
  /** Wall clock for the time a report was received; default Date.now. */
  clock?: () => number;
  /**
   * Clock and timers that pace each data plane's writes (coalesceMs, retryMs); default the
   * monotonic clock and real timers. Tests step a ManualScheduler instead of waiting.
   */
  pacer?: Scheduler;
}

/** Where the shared view goes: every replica's reports, as the store has them. */
export interface SharedHealthHandlers {
  /**
   * Every report in the store, after the first read. A re-read after a failed watch hands over
   * only what changed meanwhile, as onReport and onGone.
   */
  onReset(reports: ReadonlyMap<string, SharedHealthReport>): void;
  /** A data plane's report was written, by any replica. */
  onReport(report: SharedHealthReport): void;
  /** A data plane's report is gone: withdrawn, unreadable, or its replica's lease expired. */
  onGone(dataPlane: string): void;
  /** Another replica has a newer report of a data plane this one reported: it reports there now. */
  onMoved(dataPlane: string): void;
}

/**
 * A view to share, read when it is written: a data plane sending changes-only reports keeps its
 * view in a map this replica updates in place, and only the write turns it into a list.
 */
export interface LiveHealthView {
  /** Nodes in the view now. */
  count: number;
  read(): readonly ReportedNodeHealth[];
}

/** A report received here and not withdrawn: what this replica writes for the data plane. */
interface Outgoing {
  nodes: readonly ReportedNodeHealth[] | LiveHealthView;
  reportedAtMs: number;
}

/**
 * Default writeNodesPerSecond. Each write encodes the data plane's whole view (JSON, deflated
 * when large) and every replica reads it back: at 20,000 nodes, a write per report (one a second
 * per data plane) was a large share of a control plane's CPU (issue 9), and changes-only reports
 * alone would not change that. Writes of a large view are coalesced instead: the newest view is
 * always the one written, so other replicas' views stay correct, only up to count/4,000 s late;
 * transitions are journaled when the receiving replica takes the report in, not delayed.
 */
export const WRITE_NODES_PER_SECOND = 4_000;

/** One data plane's writes: one at a time, at most one per coalesceMs. */
interface Outbox {
  /** The store lags what this replica wants there (a newer report, or a withdrawal). */
  dirty: boolean;
  busy: boolean;
  /** Cancels the paced write waiting to run, if one is. */
  cancelTimer: (() => void) | undefined;
  /** Pacer time before which the next write waits. */
  notBefore: number;
}

/** What this replica last learned of a data plane's key; a first guess for guarded writes. */
interface KnownKey {
  /** Store revision of the observation, so an older one never overwrites a newer one. */
  revision: number;
  /** The key's mod revision; 0 when it does not exist. */
  modRevision: number;
  replica?: string;
  reportedAtMs?: number;
}

/** Logs nothing: the default logger. */
const SILENT = { debug() {}, info() {}, warn() {} };

/** Tries of a guarded write before giving up until the next report or retry. */
const MAX_WRITE_ATTEMPTS = 5;

/**
 * Node-health reports shared between control-plane replicas through the store. Each replica
 * writes every report its data planes send to `{prefix}meta/health/{nodeId}`, bound to a lease
 * it keeps alive, and reads every replica's reports back through the shared informer (a paged
 * list, then a watch; a re-read when the watch fails), so each replica, and the remediation
 * leader, counts the whole fleet.
 *
 * Memory: a report can be a megabyte deflated and tens of megabytes parsed, so each is held
 * once. The informer keeps only the keys' revisions (keepValues: false), this class keeps no
 * report at all once it is handed over, and the handlers keep what they need of it.
 *
 * A report replaces the stored one only if it was received no earlier (the store's compare
 * guards the check), so a late write from a replica a data plane just left never hides the
 * newer report from the replica it moved to.
 */
export class SharedHealthReports {
  readonly replicaId: string;
  readonly #store: Store;
  readonly #prefix: string;
  readonly #ttlSeconds: number;
  readonly #coalesceMs: number;
  readonly #writeNodesPerSecond: number;
  readonly #retryMs: number;
  readonly #logger: SharedHealthReportsOptions["logger"];
  readonly #clock: () => number;
  readonly #pacer: Scheduler;
  readonly #latest = new Map<string, Outgoing>();
  readonly #outboxes = new Map<string, Outbox>();
  readonly #known = new Map<string, KnownKey>();
  /** Mod revision of this replica's last write of each data plane's key, for withdrawals. */
  readonly #own = new Map<string, number>();
  /**
   * The value of each data plane's write under way: its watch event may come before the commit's
   * answer, and is then recognised by it rather than read back.
   */
  readonly #committing = new Map<string, string>();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #informer: Informer;
  /**
   * The tail of each data plane's read chain: its reports are inflated off the event loop, one
   * after another, so a large report still inflating is never overtaken by a newer small one.
   */
  readonly #reading = new Map<string, Promise<void>>();
  /** Settles once the first read is handed over; every read chain starts after it. */
  #firstRead: Promise<void> = Promise.resolve();
  /**
   * The first read is handed over: the informer's first batch (its list, or, when that was
   * empty, the first events after it, which are then the whole store).
   */
  #listed = false;
  #handlers: SharedHealthHandlers | undefined;
  #lease: string | undefined;
  #granting: Promise<string> | undefined;
  #keepAliveTimer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: SharedHealthReportsOptions) {
    this.replicaId = options.replicaId;
    this.#store = options.store;
    this.#prefix = options.prefix;
    this.#ttlSeconds = options.leaseTtlSeconds ?? 10;
    this.#coalesceMs = options.coalesceMs ?? 100;
    this.#writeNodesPerSecond = options.writeNodesPerSecond ?? WRITE_NODES_PER_SECOND;
    if (!(this.#writeNodesPerSecond > 0)) {
      throw new RangeError(`writeNodesPerSecond must be > 0, got ${this.#writeNodesPerSecond}`);
    }
    this.#retryMs = options.retryMs ?? 1_000;
    this.#logger = options.logger;
    this.#clock = options.clock ?? Date.now;
    this.#pacer = options.pacer ?? monotonicScheduler;
    if (!(Number.isInteger(this.#ttlSeconds) && this.#ttlSeconds >= 1)) {
      throw new RangeError(`leaseTtlSeconds must be an integer >= 1, got ${this.#ttlSeconds}`);
    }
    if (!(this.#coalesceMs >= 0 && this.#retryMs >= 0)) {
      throw new RangeError(
        `coalesceMs (${this.#coalesceMs}) and retryMs (${this.#retryMs}) must not be negative`,
      );
    }
    const relistMs = Math.max(this.#retryMs, 1);
    this.#informer = new Informer({
      store: options.store,
      prefixes: [healthReportPrefix(options.prefix)],
      name: "health report",
      logger: options.logger ?? SILENT,
      keepValues: false,
      retryMinMs: relistMs,
      retryMaxMs: Math.max(relistMs, 5_000),
      onBatch: (batch) => this.#read(batch),
    });
  }

  /** Reads every report into `handlers.onReset`, then follows the store; rejects if that read fails. */
  async start(handlers: SharedHealthHandlers): Promise<void> {
    this.#handlers = handlers;
    this.#keepAlive();
    await this.#informer.start();
    // The informer hands over no batch for an empty list: the first read is then an empty one.
    if (!this.#listed) {
      this.#listed = true;
      this.#firstRead = this.#readAll([]);
    }
    await this.#firstRead;
  }

  /**
   * Stops watching and keeping the lease alive, and waits for writes under way. The lease is
   * left to expire rather than revoked: the data planes move to another replica and report
   * there, and until they do their last reports still count.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#keepAliveTimer);
    for (const outbox of this.#outboxes.values()) outbox.cancelTimer?.();
    await this.#informer.stop();
    await Promise.all([...this.#inFlight, ...this.#reading.values(), this.#firstRead]);
  }

  /**
   * Shares `dataPlane`'s whole view, received here now; replaces any report not yet written. A
   * LiveHealthView is read when the write starts, so it holds the newest view then.
   */
  publish(dataPlane: string, nodes: readonly ReportedNodeHealth[] | LiveHealthView): void {
    if (this.#stopped) return;
    this.#latest.set(dataPlane, { nodes, reportedAtMs: this.#clock() });
    this.#markDirty(dataPlane);
  }

  /** Deletes `dataPlane`'s report if this replica wrote the stored one (it left for good). */
  withdraw(dataPlane: string): void {
    if (this.#stopped || !this.#latest.delete(dataPlane)) return;
    this.#markDirty(dataPlane);
  }

  #markDirty(dataPlane: string): void {
    let outbox = this.#outboxes.get(dataPlane);
    if (outbox === undefined) {
      outbox = { dirty: false, busy: false, cancelTimer: undefined, notBefore: 0 };
      this.#outboxes.set(dataPlane, outbox);
    }
    outbox.dirty = true;
    this.#kick(dataPlane, outbox);
  }

  #kick(dataPlane: string, outbox: Outbox): void {
    if (this.#stopped || outbox.busy || outbox.cancelTimer !== undefined) return;
    if (!outbox.dirty) {
      if (!this.#latest.has(dataPlane)) this.#outboxes.delete(dataPlane);
      return;
    }
    const now = this.#pacer.now();
    if (now < outbox.notBefore) {
      outbox.cancelTimer = this.#pacer.after(outbox.notBefore - now, () => {
        outbox.cancelTimer = undefined;
        this.#kick(dataPlane, outbox);
      });
      return;
    }
    outbox.dirty = false;
    outbox.busy = true;
    const latest = this.#latest.get(dataPlane);
    const count = latest === undefined ? 0 : countOf(latest.nodes);
    outbox.notBefore =
      now + Math.max(this.#coalesceMs, (count * 1_000) / this.#writeNodesPerSecond);
    const run = (latest === undefined ? this.#delete(dataPlane) : this.#write(dataPlane, latest))
      .catch((error: unknown) => {
        if (error instanceof HealthReportTooLarge) {
          // Trying again cannot help: this replica keeps the report for itself until a smaller
          // one comes, and other replicas keep their last view of this data plane.
          this.#logger?.warn({ err: error, dataPlane }, "health report too large to share");
          return;
        }
        this.#logger?.warn(
          { err: error, dataPlane, retryMs: this.#retryMs },
          "could not share a data plane's health report; trying again",
        );
        outbox.dirty = true;
        outbox.notBefore = this.#pacer.now() + this.#retryMs;
      })
      .finally(() => {
        this.#inFlight.delete(run);
        outbox.busy = false;
        this.#kick(dataPlane, outbox);
      });
    this.#inFlight.add(run);
  }

  async #write(dataPlane: string, outgoing: Outgoing): Promise<void> {
    const key = healthReportKey(this.#prefix, dataPlane);
    const nodes = "read" in outgoing.nodes ? outgoing.nodes.read() : outgoing.nodes;
    const value = await encodeHealthReport({
      replica: this.replicaId,
      reportedAtMs: outgoing.reportedAtMs,
      nodes,
    });
    let known = this.#known.get(dataPlane);
    for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
      if (this.#stopped) return;
      if (this.#newerElsewhere(known, outgoing.reportedAtMs)) {
        this.#superseded(dataPlane, outgoing);
        return;
      }
      const lease = await this.#currentLease();
      if (this.#stopped) return;
      let committed: { succeeded: boolean; revision: number };
      this.#committing.set(dataPlane, value);
      try {
        committed = await this.#store.commit(
          [{ key, modRevision: known?.modRevision ?? 0 }],
          [{ type: "put", key, value, lease }],
        );
      } catch (error) {
        if (!isLeaseGone(error)) throw error;
        this.#leaseLost(lease);
        continue;
      } finally {
        this.#committing.delete(dataPlane);
      }
      if (committed.succeeded) {
        this.#own.set(dataPlane, committed.revision);
        this.#handOverOwn(dataPlane, outgoing.reportedAtMs, nodes, committed.revision);
        return;
      }
      // Someone changed the key since this replica last saw it: look again, then decide.
      const current = await this.#store.get(key);
      known = await knownFrom(dataPlane, current, current?.modRevision ?? 0);
      this.#observe(dataPlane, known);
    }
    throw new Error(`the health report key of ${dataPlane} kept changing`);
  }

  async #delete(dataPlane: string): Promise<void> {
    const own = this.#own.get(dataPlane);
    if (own === undefined) return;
    const key = healthReportKey(this.#prefix, dataPlane);
    // Only the report this replica wrote: a newer one from another replica stays.
    await this.#store.commit([{ key, modRevision: own }], [{ type: "delete", key }]);
    if (this.#own.get(dataPlane) === own) this.#own.delete(dataPlane);
  }

  /** True when the stored report came from another replica that received it after `atMs`. */
  #newerElsewhere(known: KnownKey | undefined, atMs: number): boolean {
    return (
      known !== undefined &&
      known.modRevision !== 0 &&
      known.replica !== this.replicaId &&
      (known.reportedAtMs ?? 0) > atMs
    );
  }

  /** Another replica holds a newer report of `dataPlane`: stop speaking for it. */
  #superseded(dataPlane: string, outgoing?: Outgoing): void {
    const latest = this.#latest.get(dataPlane);
    if (latest === undefined || (outgoing !== undefined && latest !== outgoing)) return;
    this.#latest.delete(dataPlane);
    this.#own.delete(dataPlane);
    const outbox = this.#outboxes.get(dataPlane);
    if (outbox !== undefined) {
      outbox.dirty = false;
      outbox.cancelTimer?.();
      outbox.cancelTimer = undefined;
      if (!outbox.busy) this.#outboxes.delete(dataPlane);
    }
    this.#handlers?.onMoved(dataPlane);
  }

  #currentLease(): Promise<string> {
    if (this.#lease !== undefined) return Promise.resolve(this.#lease);
    this.#granting ??= this.#store.grantLease(this.#ttlSeconds).then(
      (lease) => {
        this.#granting = undefined;
        this.#lease = lease;
        return lease;
      },
      (error: unknown) => {
        this.#granting = undefined;
        throw error;
      },
    );
    return this.#granting;
  }

  /** The lease expired (etcd was out of reach longer than its TTL): its keys are gone with it. */
  #leaseLost(lease: string): void {
    if (this.#lease !== lease) return;
    this.#lease = undefined;
    this.#own.clear();
    this.#logger?.warn(
      { lease, dataPlanes: this.#latest.size },
      "health report lease expired; writing this replica's reports again on a new lease",
    );
    for (const dataPlane of this.#latest.keys()) this.#markDirty(dataPlane);
  }

  /** Refreshes the lease every third of its TTL, so two refreshes may fail before it expires. */
  #keepAlive(): void {
    if (this.#stopped) return;
    this.#keepAliveTimer = setTimeout(
      () => {
        const lease = this.#lease;
        if (lease === undefined) {
          this.#keepAlive();
          return;
        }
        this.#store
          .refreshLease(lease)
          .then(
            (alive) => {
              if (!alive) this.#leaseLost(lease);
            },
            (error: unknown) => {
              this.#logger?.warn(
                { err: error, lease },
                "could not refresh the health report lease",
              );
            },
          )
          .finally(() => this.#keepAlive());
      },
      (this.#ttlSeconds * 1_000) / 3,
    );
    this.#keepAliveTimer.unref();
  }

  /** A batch from the informer: its reports are parsed off the event loop, then handed over. */
  #read(batch: InformerBatch): void {
    if (!this.#listed) {
      this.#listed = true;
      this.#firstRead = this.#readAll(batch.changes);
      return;
    }
    for (const change of batch.changes) {
      const dataPlane = parseHealthReportKey(this.#prefix, change.key);
      if (dataPlane !== undefined) this.#readInOrder(dataPlane, change);
    }
  }

  /** The first read: every report, inflated side by side, handed over as one reset. */
  async #readAll(changes: readonly InformerChange[]): Promise<void> {
    const parsed = await Promise.all(
      changes.map(async ({ key, current, revision }) => {
        const dataPlane = parseHealthReportKey(this.#prefix, key);
        if (dataPlane === undefined || current === undefined) return undefined;
        const parsed = await parseHealthReport(dataPlane, current.value);
        return { dataPlane, current, revision, parsed };
      }),
    );
    if (this.#stopped) return;
    const reports = new Map<string, SharedHealthReport>();
    for (const item of parsed) {
      if (item === undefined) continue;
      const { dataPlane, current, revision } = item;
      this.#observe(dataPlane, { ...knownOf(current, item.parsed), revision });
      if (item.parsed.ok) reports.set(dataPlane, item.parsed.report);
      else this.#skip(current.key, item.parsed.reason);
    }
    this.#handlers?.onReset(reports);
    for (const report of reports.values()) this.#followWriter(report);
  }

  /**
   * This replica's own write, handed over from memory rather than read back from the store
   * (inflating and parsing megabytes it just wrote; issue 9), in order with the data plane's
   * reads: unless the store has moved past it meanwhile, as #observe decides.
   */
  #handOverOwn(
    dataPlane: string,
    reportedAtMs: number,
    nodes: readonly ReportedNodeHealth[],
    revision: number,
  ): void {
    const before = this.#reading.get(dataPlane) ?? this.#firstRead;
    const done = before
      .then(() => {
        if (this.#stopped) return;
        this.#observe(dataPlane, {
          revision,
          modRevision: revision,
          replica: this.replicaId,
          reportedAtMs,
        });
        if (this.#known.get(dataPlane)?.revision !== revision) return;
        this.#handlers?.onReport({ dataPlane, replica: this.replicaId, reportedAtMs, nodes });
      })
      .finally(() => {
        if (this.#reading.get(dataPlane) === done) this.#reading.delete(dataPlane);
      });
    this.#reading.set(dataPlane, done);
  }

  /** Hands `change` over after every earlier change of the same data plane. */
  #readInOrder(dataPlane: string, change: InformerChange): void {
    // This replica's own write: handed over from memory when it committed (#handOverOwn).
    const current = change.current;
    if (
      current !== undefined &&
      (current.modRevision === this.#own.get(dataPlane) ||
        current.value === this.#committing.get(dataPlane))
    ) {
      return;
    }
    const before = this.#reading.get(dataPlane) ?? this.#firstRead;
    const parsing =
      change.current === undefined ? undefined : parseHealthReport(dataPlane, change.current.value);
    // Inflating starts now, beside the data plane's earlier reports; only the hand-over waits.
    parsing?.catch(() => undefined);
    const done = before
      .then(async () => this.#handOver(dataPlane, change, await parsing))
      .catch((error: unknown) => {
        this.#logger?.warn({ err: error, dataPlane }, "could not read a shared health report");
      })
      .finally(() => {
        if (this.#reading.get(dataPlane) === done) this.#reading.delete(dataPlane);
      });
    this.#reading.set(dataPlane, done);
  }

  #handOver(dataPlane: string, change: InformerChange, parsed: ParsedHealthReport | undefined) {
    if (this.#stopped) return;
    const { current, revision } = change;
    if (current === undefined || parsed === undefined) {
      this.#observe(dataPlane, { revision, modRevision: 0 });
      this.#handlers?.onGone(dataPlane);
      return;
    }
    this.#observe(dataPlane, { ...knownOf(current, parsed), revision });
    if (!parsed.ok) {
      this.#skip(current.key, parsed.reason);
      this.#handlers?.onGone(dataPlane);
      return;
    }
    this.#handlers?.onReport(parsed.report);
    this.#followWriter(parsed.report);
  }

  #skip(key: string, reason: string): void {
    this.#logger?.debug({ key, reason }, "skipping a health report");
  }

  /** Another replica's report, newer than what this one received: the data plane moved. */
  #followWriter(report: SharedHealthReport): void {
    if (report.replica === this.replicaId) return;
    const latest = this.#latest.get(report.dataPlane);
    if (latest !== undefined && report.reportedAtMs >= latest.reportedAtMs) {
      this.#superseded(report.dataPlane);
    }
  }

  #observe(dataPlane: string, known: KnownKey): void {
    const previous = this.#known.get(dataPlane);
    if (previous !== undefined && previous.revision > known.revision) return;
    if (known.modRevision === 0) this.#known.delete(dataPlane);
    else this.#known.set(dataPlane, known);
  }
}

async function knownFrom(
  dataPlane: string,
  kv: KeyValue | undefined,
  revision: number,
): Promise<KnownKey> {
  if (kv === undefined) return { revision, modRevision: 0 };
  return { ...knownOf(kv, await parseHealthReport(dataPlane, kv.value)), revision };
}

/** What a stored key says about who wrote it and when, observed at the key's own revision. */
function knownOf(kv: KeyValue, parsed: ParsedHealthReport): KnownKey {
  const known: KnownKey = { revision: kv.modRevision, modRevision: kv.modRevision };
  if (parsed.ok) {
    known.replica = parsed.report.replica;
    known.reportedAtMs = parsed.report.reportedAtMs;
  }
  return known;
}

function countOf(nodes: readonly ReportedNodeHealth[] | LiveHealthView): number {
  return "read" in nodes ? nodes.count : nodes.length;
}
