import type { Logger } from "pino";
import { Informer, type InformerBatch } from "../store/informer.js";
import { isLeaseGone } from "../store/lease-gone.js";
import type { Operation, Store } from "../store/store.js";
import {
  type DataPlaneRecord,
  dataPlaneRecordKey,
  dataPlaneRecordSchema,
  dataPlaneRecordsPrefix,
  parseDataPlaneRecordKey,
  type ReportedBreaker,
  type ReportedOutcome,
  type SharedDataPlane,
} from "./data-plane-record.js";

export interface DataPlaneRecordsOptions {
  /**
   * Shares the records with the other replicas through this store; default none: the view is
   * this process's data planes (the whole fleet with the embedded store, a single process).
   */
  store?: Store | undefined;
  /** Key prefix with its trailing slash (e.g. "/clawgate/"). */
  prefix: string;
  /** This replica's id: its records go under a key of their own. */
  replicaId: string;
  /** TTL of the lease the records are bound to: how long they outlive a dead replica; default 10 s. */
  leaseTtlSeconds?: number;
  /** Changes wait this long, so one commit carries every data plane's changes; default 500 ms. */
  flushMs?: number;
  logger?: Pick<Logger, "debug" | "info" | "warn">;
  /** Wall clock for changedAtMs; default Date.now. */
  clock?: () => number;
}

/** Puts and deletes in one commit, under etcd's default --max-txn-ops (128). */
const MAX_OPS = 100;
const SILENT = { debug() {}, info() {}, warn() {} };
const EMPTY: DataPlaneRecord = { changedAtMs: 0, outcomes: [], breakers: [] };

/**
 * What every replica's data planes report beyond node health (request outcomes per version,
 * breaker states), shared between control-plane replicas so the rollout leader judges and the
 * console shows the whole fleet, not only the data planes that stream from it.
 *
 * Each replica writes one key per data plane connected to it, under its own part of the store
 * (no two replicas ever write one key), bound to a lease it keeps alive, and deletes it when the
 * data plane disconnects. Writes are proportional to changes: a record is written only when its
 * content changed, and every change within flushMs goes in one commit. Every replica reads all
 * the records back through an informer; for a data plane two replicas hold (a reconnect in
 * flight), the newest record wins.
 */
export class DataPlaneRecords {
  readonly #options: DataPlaneRecordsOptions;
  readonly #logger: Pick<Logger, "debug" | "info" | "warn">;
  readonly #clock: () => number;
  readonly #ttlSeconds: number;
  readonly #flushMs: number;
  /** This replica's records, by data plane. */
  readonly #local = new Map<string, { record: DataPlaneRecord; json: string }>();
  /** Other replicas' records, by replica then data plane. */
  readonly #remote = new Map<string, Map<string, DataPlaneRecord>>();
  /** Data planes whose key lags #local (a newer record, or a delete). */
  readonly #dirty = new Set<string>();
  readonly #listeners = new Set<(nodeId: string) => void>();
  readonly #informer: Informer | undefined;
  #lease: string | undefined;
  #flushTimer: NodeJS.Timeout | undefined;
  #keepAliveTimer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #stopped = false;

  constructor(options: DataPlaneRecordsOptions) {
    this.#options = options;
    this.#logger = options.logger ?? SILENT;
    this.#clock = options.clock ?? Date.now;
    this.#ttlSeconds = options.leaseTtlSeconds ?? 10;
    this.#flushMs = options.flushMs ?? 500;
    if (!(Number.isInteger(this.#ttlSeconds) && this.#ttlSeconds >= 1)) {
      throw new RangeError(`leaseTtlSeconds must be an integer >= 1, got ${this.#ttlSeconds}`);
    }
    if (!(this.#flushMs >= 0)) throw new RangeError(`flushMs must be >= 0, got ${this.#flushMs}`);
    if (options.store !== undefined) {
      this.#informer = new Informer({
        store: options.store,
        prefixes: [dataPlaneRecordsPrefix(options.prefix)],
        name: "data-plane record",
        logger: this.#logger,
        retryMinMs: 1_000,
        onBatch: (batch) => this.#read(batch),
      });
    }
  }

  /** Reads every replica's records and follows the store; rejects if the first read fails. */
  async start(): Promise<void> {
    if (this.#informer === undefined) return;
    await this.#informer.start();
    this.#keepAlive();
  }

  /** Stops following the store; the records expire with the lease unless another replica writes them. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#flushTimer);
    clearTimeout(this.#keepAliveTimer);
    await this.#informer?.stop();
    await this.#flushing;
  }

  /** `nodeId` streams from this replica now: it has a record (empty until it reports). */
  connected(nodeId: string): void {
    if (!this.#local.has(nodeId)) this.#set(nodeId, { ...EMPTY, changedAtMs: this.#clock() });
  }

  /** `nodeId` left this replica: its record goes. */
  disconnected(nodeId: string): void {
    if (!this.#local.delete(nodeId)) return;
    this.#changed(nodeId);
  }

  /** The data plane's latest OutcomeReport (cumulative counts per version) replaces the last. */
  outcomes(nodeId: string, outcomes: readonly ReportedOutcome[]): void {
    const current = this.#local.get(nodeId)?.record ?? EMPTY;
    this.#set(nodeId, { ...current, outcomes: [...outcomes], changedAtMs: this.#clock() });
  }

  /** The data plane's latest BreakerReport (every breaker it has) replaces the last. */
  breakers(nodeId: string, breakers: readonly ReportedBreaker[]): void {
    const current = this.#local.get(nodeId)?.record ?? EMPTY;
    this.#set(nodeId, { ...current, breakers: [...breakers], changedAtMs: this.#clock() });
  }

  /** Where the data plane stands on this replica (applied version, last NACK) replaces the last. */
  status(nodeId: string, dataPlane: SharedDataPlane): void {
    const current = this.#local.get(nodeId)?.record ?? EMPTY;
    this.#set(nodeId, { ...current, dataPlane, changedAtMs: this.#clock() });
  }

  /** Every data plane some replica holds a record of (a connected one), sorted. */
  nodes(): string[] {
    const ids = new Set(this.#local.keys());
    for (const records of this.#remote.values()) for (const id of records.keys()) ids.add(id);
    return [...ids].sort();
  }

  /** The newest record of `nodeId` among the replicas; undefined when none holds one. */
  get(nodeId: string): DataPlaneRecord | undefined {
    let newest = this.#local.get(nodeId)?.record;
    for (const records of this.#remote.values()) {
      const record = records.get(nodeId);
      if (record !== undefined && (newest === undefined || record.changedAtMs > newest.changedAtMs))
        newest = record;
    }
    return newest;
  }

  /** The newest record of `nodeId` among the other replicas, with the replica that wrote it. */
  remote(nodeId: string): { replica: string; record: DataPlaneRecord } | undefined {
    let newest: { replica: string; record: DataPlaneRecord } | undefined;
    for (const [replica, records] of this.#remote) {
      const record = records.get(nodeId);
      if (
        record !== undefined &&
        (newest === undefined || record.changedAtMs > newest.record.changedAtMs)
      )
        newest = { replica, record };
    }
    return newest;
  }

  /** Calls `listener` after any replica's record of a data plane changed; returns the unsubscribe. */
  onChange(listener: (nodeId: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #set(nodeId: string, record: DataPlaneRecord): void {
    const json = JSON.stringify({
      outcomes: record.outcomes,
      breakers: record.breakers,
      dataPlane: record.dataPlane,
    });
    // Only a change is written: a data plane repeating itself costs the store nothing.
    if (this.#local.get(nodeId)?.json === json) return;
    this.#local.set(nodeId, { record, json });
    this.#changed(nodeId);
  }

  #changed(nodeId: string): void {
    this.#notify(nodeId);
    if (this.#informer === undefined || this.#stopped) return;
    this.#dirty.add(nodeId);
    this.#schedule(this.#flushMs);
  }

  #schedule(delayMs: number): void {
    if (this.#flushTimer !== undefined || this.#flushing !== undefined || this.#stopped) return;
    this.#flushTimer = setTimeout(() => {
      this.#flushTimer = undefined;
      this.#flushing = this.#flush().finally(() => {
        this.#flushing = undefined;
        if (this.#dirty.size > 0) this.#schedule(this.#flushMs);
      });
    }, delayMs);
    this.#flushTimer.unref();
  }

  /** Writes every dirty record, up to MAX_OPS a commit. */
  async #flush(): Promise<void> {
    const store = this.#options.store as Store;
    const nodes = [...this.#dirty];
    this.#dirty.clear();
    try {
      const lease = await this.#currentLease();
      for (let start = 0; start < nodes.length; start += MAX_OPS) {
        const operations: Operation[] = nodes.slice(start, start + MAX_OPS).map((nodeId) => {
          const key = dataPlaneRecordKey(this.#options.prefix, this.#options.replicaId, nodeId);
          const local = this.#local.get(nodeId);
          return local === undefined
            ? { type: "delete", key }
            : { type: "put", key, value: JSON.stringify(local.record), lease };
        });
        await store.commit([], operations);
      }
    } catch (error) {
      for (const nodeId of nodes) this.#dirty.add(nodeId);
      if (isLeaseGone(error)) {
        // Its keys went with it: write every record again on a new lease.
        this.#lease = undefined;
        for (const nodeId of this.#local.keys()) this.#dirty.add(nodeId);
      }
      this.#logger.warn(
        { err: error, dataPlanes: nodes.length },
        "could not share data-plane records; trying again",
      );
      await new Promise((resolve) => setTimeout(resolve, 1_000).unref());
    }
  }

  async #currentLease(): Promise<string> {
    this.#lease ??= await (this.#options.store as Store).grantLease(this.#ttlSeconds);
    return this.#lease;
  }

  /** Refreshes the lease every third of its TTL, so two refreshes may fail before it expires. */
  #keepAlive(): void {
    if (this.#stopped) return;
    this.#keepAliveTimer = setTimeout(
      () => {
        const lease = this.#lease;
        const store = this.#options.store as Store;
        if (lease === undefined) {
          this.#keepAlive();
          return;
        }
        store
          .refreshLease(lease)
          .then(
            (alive) => {
              if (alive || this.#lease !== lease) return;
              this.#lease = undefined;
              for (const nodeId of this.#local.keys()) this.#dirty.add(nodeId);
              this.#schedule(0);
            },
            (error: unknown) =>
              this.#logger.warn({ err: error }, "could not refresh the data-plane record lease"),
          )
          .finally(() => this.#keepAlive());
      },
      (this.#ttlSeconds * 1_000) / 3,
    );
    this.#keepAliveTimer.unref();
  }

  #read(batch: InformerBatch): void {
    for (const { key, current } of batch.changes) {
      const names = parseDataPlaneRecordKey(this.#options.prefix, key);
      // This replica's own keys mirror #local, which is newer.
      if (names === undefined || names.replica === this.#options.replicaId) continue;
      let records = this.#remote.get(names.replica);
      if (current === undefined) {
        records?.delete(names.nodeId);
        if (records?.size === 0) this.#remote.delete(names.replica);
        this.#notify(names.nodeId);
        continue;
      }
      const parsed = parseRecord(current.value);
      if (parsed === undefined) {
        this.#logger.warn({ key }, "ignoring an unreadable data-plane record");
        continue;
      }
      if (records === undefined) {
        records = new Map();
        this.#remote.set(names.replica, records);
      }
      records.set(names.nodeId, parsed);
      this.#notify(names.nodeId);
    }
  }

  #notify(nodeId: string): void {
    for (const listener of this.#listeners) {
      try {
        listener(nodeId);
      } catch (error) {
        this.#logger.warn({ err: error }, "data-plane record listener failed");
      }
    }
  }
}

function parseRecord(value: string): DataPlaneRecord | undefined {
  try {
    const parsed = dataPlaneRecordSchema.safeParse(JSON.parse(value));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
