import type { Snapshot } from "@clawgate/proto";
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
  /** Compiles and swaps in the cached snapshot, as a control plane's would be. */
  apply: (snapshot: Snapshot) => CacheApplyResult;
  /** Told when the cached snapshot is being served. */
  onServedFromCache?: (version: number) => void;
  /**
   * Snapshots delivered within this window are written once, the newest; default 0 (the next
   * timer turn). Writing encodes the whole config, so at one write per change a stream of
   * one-route deltas would cost a full encode each; stop() writes what is still pending.
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
  /** The newest delivered snapshot not yet handed to the cache, and its timer. */
  #pending: Snapshot | undefined;
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
    this.#options.metrics.fromCache(false);
    this.#pending = snapshot;
    if (this.#saveTimer !== undefined || this.#stopped) return;
    this.#saveTimer = setTimeout(() => this.#savePending(), this.#options.saveDelayMs ?? 0);
    this.#saveTimer.unref();
  }

  #savePending(): void {
    this.#saveTimer = undefined;
    const snapshot = this.#pending;
    this.#pending = undefined;
    if (snapshot === undefined) return;
    const { cache, metrics, logger } = this.#options;
    void cache.save(snapshot).then((result) => {
      if (result.ok) {
        metrics.saved(result.version);
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
    await this.#options.cache.flush();
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
    // A control plane may have answered while the file was read; its snapshot wins.
    if (this.#stopped || hasSnapshot()) return;
    const result = apply(loaded.snapshot);
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
