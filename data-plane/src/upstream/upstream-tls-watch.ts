import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { FrozenCompiledSnapshot } from "../compiler/frozen-compiled-snapshot.js";
import { StableFilePoll } from "../file-watch/stable-file-poll.js";
import type { TlsFileStat } from "./tls-context-cache.js";

export interface UpstreamTlsWatchOptions {
  /**
   * Called when a file some upstream's `tls` names settled on disk on contents other than those
   * the upstream's pools were built from, with those upstreams: the caller compiles the served
   * snapshot again, which reads the files again (a new CA or client certificate gives new pool
   * settings, so new connections use it while requests in flight finish on the old pool), or
   * refuses the change and keeps the previous files' pools.
   */
  onChange(upstreams: readonly string[]): void;
  /** How often each file is stat'ed; default 1000 ms, as the proxy's own certificates. */
  pollIntervalMs?: number;
  /** The poll to use (a test drives one by hand); default one of its own. */
  poll?: StableFilePoll;
}

/**
 * Watches the CA, client certificate and key files of every upstream with `tls`, as the proxy
 * listener watches its certificates: polled with stat (StableFilePoll), so a renewal written
 * beside the file and renamed over it (certbot, Kubernetes secret volumes) is seen, which an
 * inotify watch on the old inode would miss. sync() follows each applied snapshot.
 *
 * Each path is compared with the stats its upstreams' contexts were read at (TlsContextCache
 * records them), not with the file at some later first poll: a renewal landing between the
 * read and the watch's start is a change, and so is a snapshot compiled across turns that read
 * the file before a renewal already reloaded, swapped in after that reload.
 */
export class UpstreamTlsWatch {
  /** Path to the upstreams naming it, by the stat their context was read at. */
  readonly #watched = new Map<string, Map<string, Set<string>>>();
  /** Upstream to the files it was built from. */
  readonly #byUpstream = new Map<string, readonly TlsFileStat[]>();
  readonly #options: UpstreamTlsWatchOptions;
  readonly #poll: StableFilePoll;
  #closed = false;

  constructor(options: UpstreamTlsWatchOptions) {
    this.#options = options;
    this.#poll =
      options.poll ?? new StableFilePoll({ intervalMs: options.pollIntervalMs ?? 1_000 });
  }

  /**
   * Follows a swap from `previous` to `next`: a snapshot compiled from a delta on `previous`
   * names the upstreams it touched, so a delta costs what it touched; a whole one is walked.
   */
  sync(previous: CompiledSnapshot | undefined, next: CompiledSnapshot): void {
    if (this.#closed) return;
    const changes = next instanceof FrozenCompiledSnapshot ? next.changes : undefined;
    const names =
      previous !== undefined && changes !== undefined && changes.base.deref() === previous
        ? changes.upstreams
        : new Set([...this.#byUpstream.keys(), ...next.upstreams.keys()]);
    const touched = new Set<string>();
    for (const name of names) {
      for (const file of this.#byUpstream.get(name) ?? []) {
        this.#watched.get(file.path)?.get(file.stat)?.delete(name);
        touched.add(file.path);
      }
      const files = next.upstreams.get(name)?.tls?.files ?? [];
      if (files.length === 0) this.#byUpstream.delete(name);
      else this.#byUpstream.set(name, files);
      for (const file of files) {
        let byStat = this.#watched.get(file.path);
        if (byStat === undefined) {
          byStat = new Map();
          this.#watched.set(file.path, byStat);
          this.#poll.watch(file.path, file.stat, (now) => this.#changed(file.path, now));
        }
        let upstreams = byStat.get(file.stat);
        if (upstreams === undefined) {
          upstreams = new Set();
          byStat.set(file.stat, upstreams);
        }
        upstreams.add(name);
        touched.add(file.path);
      }
    }
    for (const path of touched) this.#rebase(path);
  }

  /** Paths watched now, for tests and the log. */
  paths(): string[] {
    return [...this.#watched.keys()];
  }

  close(): void {
    this.#closed = true;
    this.#poll.close();
    this.#watched.clear();
    this.#byUpstream.clear();
  }

  /**
   * The poll's baseline for `path`: the one stat its upstreams were read at, or none when they
   * were read at several (then the next stable stat is checked against each).
   */
  #rebase(path: string): void {
    const byStat = this.#watched.get(path);
    if (byStat === undefined) return;
    for (const [stat, upstreams] of byStat) if (upstreams.size === 0) byStat.delete(stat);
    if (byStat.size === 0) {
      this.#watched.delete(path);
      this.#poll.unwatch(path);
      return;
    }
    this.#poll.rebase(path, byStat.size === 1 ? byStat.keys().next().value : undefined);
  }

  /** The file settled on `now`: the upstreams read at any other stat are reloaded. */
  #changed(path: string, now: string): void {
    const stale: string[] = [];
    for (const [stat, upstreams] of this.#watched.get(path) ?? []) {
      if (stat !== now) stale.push(...upstreams);
    }
    if (stale.length > 0 && !this.#closed) this.#options.onChange(stale);
  }
}
