import type { Snapshot, SnapshotDelta } from "@clawgate/proto";
import type { CacheMetrics } from "./cache-metrics.js";
import type { SnapshotCache } from "./snapshot-cache.js";

export type CacheApplyResult = { ok: true } | { ok: false; reason: string };

export type LastGoodLogger = {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
};

export interface LastGoodSnapshotOptions {
  cache: SnapshotCache;
  metrics: CacheMetrics;
  logger: LastGoodLogger;
  /** Wait this long for a control plane before serving the cached snapshot. */
  fallbackAfterMs: number;
  /** True once any snapshot is being served; the cache never replaces one. */
  hasSnapshot: () => boolean;
  /**
   * Compiles and swaps in the cached snapshot, as a control plane's would be. It may take
   * turns (a promise: with workers, until every one of them serves it); undefined when a
   * control plane's snapshot got in first, so the cache's is not served.
   */
  apply: (snapshot: Snapshot) => CacheApplyResult | Promise<CacheApplyResult | undefined>;
  /** Told once the cached snapshot is being served. */
  onServedFromCache?: (version: number) => void;
  /** Told each time a version reaches the disk (what clawgate_snapshot_cache_version shows). */
  onSaved?: (version: number) => void;
  /**
   * Snapshots delivered within this window are written once, the newest (deltas: appended as
   * one write); default 0 (the next timer turn). Fewer fsyncs for a burst of changes; stop()
   * writes what is still pending.
   */
  saveDelayMs?: number;
}

/**
 * The data plane's memory across restarts: every snapshot a control plane delivers is written
 * to disk, and at boot, if no control plane delivers one within `fallbackAfterMs`, the one on
 * disk is served, so a data plane restarts into service during a control-plane outage. A file
 * that cannot be read or fails its checksum is logged, counted and ignored.
 */
export class LastGoodSnapshot {
  readonly #options: LastGoodSnapshotOptions;
  #timer: NodeJS.Timeout | undefined;
  #loading: Promise<void> | undefined;
  #stopped = false;
  /**
   * What was delivered and not yet handed to the cache, and its timer: the deltas since the
   * last hand-over (undefined once a whole snapshot came), and the newest version whole.
   */
  #pending: { deltas: SnapshotDelta[] | undefined; whole: () => Snapshot } | undefined;
  #saveTimer: NodeJS.Timeout | undefined;

  constructor(options: LastGoodSnapshotOptions) {
    this.#options = options;
  }

  /** Arms the boot fallback. */
  start(): void {
    if (this.#stopped || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#loading = this.#fallBack();
    }, this.#options.fallbackAfterMs);
  }

  /** A control plane's snapshot was applied: it replaces the cached one, on disk too (coalesced). */
  delivered(snapshot: Snapshot): void {
    this.#deliver(undefined, () => snapshot);
  }

  /**
   * A control plane's delta was applied: it goes to disk as a delta (SnapshotCache.saveDeltas);
   * `whole` puts together the snapshot it led to, called only if the cache needs it whole.
   */
  deliveredDelta(delta: SnapshotDelta, whole: () => Snapshot): void {
    this.#deliver(delta, whole);
  }

  #deliver(delta: SnapshotDelta | undefined, whole: () => Snapshot): void {
    this.#options.metrics.fromCache(false);
    const deltas = this.#pending === undefined ? [] : this.#pending.deltas;
    this.#pending = { deltas: delta && deltas && [...deltas, delta], whole };
    if (this.#saveTimer !== undefined || this.#stopped) return;
    this.#saveTimer = setTimeout(() => this.#savePending(), this.#options.saveDelayMs ?? 0);
    this.#saveTimer.unref();
  }

  #savePending(): void {
    this.#saveTimer = undefined;
    const pending = this.#pending;
    this.#pending = undefined;
    if (pending === undefined) return;
    const { cache, metrics, logger } = this.#options;
    const { deltas, whole } = pending;
    const saved = deltas === undefined ? cache.save(whole()) : cache.saveDeltas(deltas, whole);
    void saved.then((result) => {
      if (result.ok) {
        metrics.saved(result.version);
        this.#options.onSaved?.(result.version);
        return;
      }
      metrics.error("save-io");
      logger.error({ reason: result.reason }, "cannot write the snapshot cache");
    });
  }

  /** Cancels the fallback and waits for any write, so the last snapshot is on disk at exit. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    clearTimeout(this.#saveTimer);
    // The last snapshot delivered reaches the disk before the process exits.
    this.#savePending();
    await this.#loading;
    await this.#options.cache.close();
  }

  async #fallBack(): Promise<void> {
    const { cache, metrics, logger, hasSnapshot, apply, fallbackAfterMs } = this.#options;
    if (this.#stopped) return;
    if (hasSnapshot()) {
      logger.debug(
        { fallbackAfterMs },
        "a control plane answered in time; the cache is not needed",
      );
      return;
    }
    const loaded = await cache.load();
    if (!loaded.ok) {
      if (loaded.kind === "missing") {
        logger.info({ path: cache.path }, "no cached snapshot; waiting for a control plane");
        return;
      }
      metrics.error(loaded.kind === "corrupt" ? "load-corrupt" : "load-io");
      logger.error(
        { path: cache.path, reason: loaded.reason },
        "ignoring the snapshot cache: it cannot be used; waiting for a control plane",
      );
      return;
    }
    if (loaded.ignored !== undefined) {
      // A crash mid-append: the deltas before the tear are served, the tear never is.
      metrics.error("load-corrupt");
      logger.warn({ path: cache.path, reason: loaded.ignored }, "ignoring the delta log's tail");
    }
    // A control plane may have answered while the file was read; its snapshot wins.
    if (this.#stopped || hasSnapshot()) return;
    const result = await apply(loaded.snapshot);
    if (result === undefined) {
      logger.debug({ fallbackAfterMs }, "a control plane answered first; the cache is not needed");
      return;
    }
    if (!result.ok) {
      metrics.error("load-rejected");
      logger.error(
        { path: cache.path, version: loaded.version, reason: result.reason },
        "ignoring the cached snapshot: it does not compile; waiting for a control plane",
      );
      return;
    }
    metrics.fromCache(true);
    logger.warn(
      { path: cache.path, version: loaded.version, waitedMs: fallbackAfterMs },
      "no control plane answered; serving the cached snapshot",
    );
    this.#options.onServedFromCache?.(loaded.version);
  }
}
