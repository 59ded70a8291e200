import { type Stats, unwatchFile, watchFile } from "node:fs";
import type { CompiledSnapshot, CompiledUpstream } from "../compiler/compiled-types.js";
import { FrozenCompiledSnapshot } from "../compiler/frozen-compiled-snapshot.js";

export interface UpstreamTlsWatchOptions {
  /**
   * Called when a file some upstream's `tls` names changed on disk, with the upstreams naming
   * it: the caller compiles the served snapshot again, which reads the files again (a new CA or
   * client certificate gives new pool settings, so new connections use it while requests in
   * flight finish on the old pool), or refuses the change and keeps the previous files' pools.
   */
  onChange(upstreams: readonly string[]): void;
  /** How often each file is stat'ed; default 1000 ms, as the proxy's own certificates. */
  pollIntervalMs?: number;
}

/**
 * Watches the CA, client certificate and key files of every upstream with `tls`, as the proxy
 * listener watches its certificates: polled with stat (fs.watchFile), so a renewal written
 * beside the file and renamed over it (certbot, Kubernetes secret volumes) is seen, which an
 * inotify watch on the old inode would miss. sync() follows each applied snapshot.
 */
export class UpstreamTlsWatch {
  /** Path to the upstreams naming it, its stat listener and the last change it saw. */
  readonly #watched = new Map<
    string,
    { upstreams: Set<string>; listener: (curr: Stats) => void; seen: string | undefined }
  >();
  /** Upstream to the paths it names. */
  readonly #byUpstream = new Map<string, readonly string[]>();
  readonly #options: UpstreamTlsWatchOptions;
  #closed = false;

  constructor(options: UpstreamTlsWatchOptions) {
    this.#options = options;
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
    const stale: string[] = [];
    for (const name of names) {
      const upstream = next.upstreams.get(name);
      if (upstream !== undefined && this.#readBeforeLastChange(upstream)) stale.push(name);
      const paths = upstream === undefined ? [] : filesOf(upstream);
      // Only paths it no longer names: a path kept stays watched with its last change seen.
      for (const path of this.#byUpstream.get(name) ?? []) {
        if (!paths.includes(path)) this.#release(path, name);
      }
      if (paths.length === 0) this.#byUpstream.delete(name);
      else this.#byUpstream.set(name, paths);
      for (const path of paths) this.#watch(path, name);
    }
    // A snapshot compiled across turns read its files early: a change seen (and reloaded on
    // the snapshot then served) before this one was swapped in would otherwise be lost, the
    // old files serving on since the file does not change again. Reload once more, after the
    // swap's own steps.
    if (stale.length > 0) queueMicrotask(() => this.#closed || this.#options.onChange(stale));
  }

  /** Paths watched now, for tests and the log. */
  paths(): string[] {
    return [...this.#watched.keys()];
  }

  close(): void {
    this.#closed = true;
    for (const [path, entry] of this.#watched) unwatchFile(path, entry.listener);
    this.#watched.clear();
    this.#byUpstream.clear();
  }

  #watch(path: string, upstream: string): void {
    const entry = this.#watched.get(path);
    if (entry !== undefined) {
      entry.upstreams.add(upstream);
      return;
    }
    const added = {
      upstreams: new Set([upstream]),
      seen: undefined as string | undefined,
      listener: (curr: Stats) => {
        // Gone (mid-rename, or deleted): nothing to read yet; the file's return is a change.
        if (curr.nlink === 0 || curr.mtimeMs === 0) return;
        added.seen = statKeyOf(curr);
        this.#options.onChange([...added.upstreams]);
      },
    };
    // Not persistent: watching must never keep a stopping process alive.
    watchFile(
      path,
      { interval: this.#options.pollIntervalMs ?? 1_000, persistent: false },
      added.listener,
    );
    this.#watched.set(path, added);
  }

  /** Whether a file the upstream's TLS was built from changed (as last seen) since it was read. */
  #readBeforeLastChange(upstream: CompiledUpstream): boolean {
    for (const file of upstream.tls?.files ?? []) {
      const seen = this.#watched.get(file.path)?.seen;
      if (seen !== undefined && seen !== file.stat) return true;
    }
    return false;
  }

  #release(path: string, upstream: string): void {
    const entry = this.#watched.get(path);
    if (entry === undefined) return;
    entry.upstreams.delete(upstream);
    if (entry.upstreams.size > 0) return;
    unwatchFile(path, entry.listener);
    this.#watched.delete(path);
  }
}

/** As TlsContextCache records a file's stat when it reads it. */
function statKeyOf(stat: Stats): string {
  return `${stat.ino}/${stat.mtimeMs}/${stat.size}`;
}

/** The files an upstream's TLS reads; none when it is plaintext. */
function filesOf(upstream: CompiledUpstream): string[] {
  const tls = upstream.source.tls;
  if (upstream.tls === undefined || tls === undefined) return [];
  return [tls.caFile, tls.clientCertFile, tls.clientKeyFile].filter((path) => path !== "");
}
