import { type FileHandle, mkdir, open, readFile, rename, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { Snapshot, SnapshotDelta } from "@clawgate/proto";
import { decodeCacheFile, encodeCacheFileInTurns } from "./cache-file.js";
import { decodeDeltaLog, deltaLogHeader, encodeDeltaRecords } from "./delta-log.js";
import { snapshotWithDelta } from "./snapshot-with-delta.js";

export const CACHE_FILE_NAME = "snapshot.bin";
export const DELTA_LOG_NAME = "deltas.log";

/**
 * The log is folded into a new whole file once it passes this share of the whole file's size:
 * a one-route record is some 100 bytes against 850 KB at 10,000 routes, so a compaction (a
 * whole encode, in turns) comes every few thousand changes, and a boot reads at most a quarter
 * more than the whole file.
 */
const COMPACT_AT_SHARE = 0.25;

/** A write waiting its turn: deltas to append, or (deltas undefined) a whole file to write. */
interface PendingWrite {
  deltas: SnapshotDelta[] | undefined;
  /** The whole snapshot of the newest version, put together only if a whole file is written. */
  whole: () => Snapshot;
  version: bigint;
  waiters: ((result: SaveResult) => void)[];
}

export type LoadResult =
  | {
      ok: true;
      snapshot: Snapshot;
      version: number;
      /** Why deltas at the log's end were left out (a torn tail), when some were. */
      ignored?: string;
    }
  | { ok: false; kind: "missing" | "corrupt" | "io"; reason: string };

export type SaveResult = { ok: true; version: number } | { ok: false; reason: string };

/**
 * The last good snapshot on disk, in `dir`: a whole snapshot (snapshot.bin) and the deltas
 * applied since (deltas.log, see delta-log.ts). A whole write goes to a temp file, is fsynced,
 * then renamed over the old one, so a crash mid-write leaves the previous snapshot whole; the
 * log is then removed. A delta is appended to the log and fsynced, so a one-route change costs
 * its own bytes, not an encode and checksum of the whole config (20 ms of CPU at 10,000
 * routes, on every data plane at once). A crash mid-append leaves a torn tail that reading
 * ignores; one between the rename and the log's removal leaves deltas older than the whole
 * file, which reading ignores too (they do not apply on its version). Saves are serialized and
 * coalesced: while one is writing, the ones waiting are written next as one.
 */
export class SnapshotCache {
  readonly dir: string;
  readonly path: string;
  readonly logPath: string;
  #writing: Promise<void> | undefined;
  #next: PendingWrite | undefined;
  /**
   * What this process last wrote: the version on disk, the whole file's size and the log's.
   * Unset until a whole file is written (a log read at boot may end in a torn tail, which an
   * append would then follow) and after a failed write: the next write is then whole.
   */
  #onDisk: { version: bigint; wholeBytes: number; logBytes: number } | undefined;
  /** The log, kept open between appends: an open and a close were a third of an append's CPU. */
  #log: FileHandle | undefined;

  constructor(dir: string) {
    this.dir = dir;
    this.path = join(dir, CACHE_FILE_NAME);
    this.logPath = join(dir, DELTA_LOG_NAME);
  }

  async load(): Promise<LoadResult> {
    let file: Buffer;
    try {
      file = await readFile(this.path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return { ok: false, kind: "missing", reason: `no ${this.path}` };
      return {
        ok: false,
        kind: "io",
        reason: `cannot read ${this.path}: ${(err as Error).message}`,
      };
    }
    const decoded = decodeCacheFile(file);
    if (!decoded.ok)
      return { ok: false, kind: "corrupt", reason: `${this.path}: ${decoded.reason}` };
    let log: Buffer;
    try {
      log = await readFile(this.logPath);
    } catch (err) {
      // No log: no delta since the whole file. One that cannot be read costs only its deltas.
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return decoded;
      return { ...decoded, ignored: `cannot read ${this.logPath}: ${(err as Error).message}` };
    }
    const { deltas, stopped } = decodeDeltaLog(log, decoded.snapshot.version);
    let snapshot = decoded.snapshot;
    for (const delta of deltas) snapshot = snapshotWithDelta(snapshot, delta);
    return {
      ok: true,
      snapshot,
      version: Number(snapshot.version),
      ...(stopped === undefined ? {} : { ignored: `${this.logPath}: ${stopped}` }),
    };
  }

  /** Writes the snapshot whole; resolves when it (or a newer one queued behind it) is on disk. */
  save(snapshot: Snapshot): Promise<SaveResult> {
    return this.#queue(undefined, () => snapshot, snapshot.version);
  }

  /**
   * Appends the deltas (each on the one before) to what is on disk, or writes `whole()` (the
   * snapshot the last one leads to) when what is on disk is not the first one's base or the
   * log has grown past its share of the whole file.
   */
  saveDeltas(deltas: readonly SnapshotDelta[], whole: () => Snapshot): Promise<SaveResult> {
    const last = deltas[deltas.length - 1];
    if (last === undefined) return this.save(whole());
    return this.#queue([...deltas], whole, last.version);
  }

  #queue(
    deltas: SnapshotDelta[] | undefined,
    whole: () => Snapshot,
    version: bigint,
  ): Promise<SaveResult> {
    return new Promise((resolve) => {
      const next = this.#next;
      if (next !== undefined) {
        // A newer version joins the queued one; its waiters learn the newer outcome.
        next.deltas = next.deltas && deltas && [...next.deltas, ...deltas];
        next.whole = whole;
        next.version = version;
        next.waiters.push(resolve);
      } else {
        this.#next = { deltas, whole, version, waiters: [resolve] };
      }
      if (this.#writing === undefined) this.#writing = this.#drainQueue();
    });
  }

  /** Resolves once no write is in progress. */
  async flush(): Promise<void> {
    await this.#writing;
  }

  /** Waits for the writes in progress, then closes the log; a later append opens it again. */
  async close(): Promise<void> {
    await this.#writing;
    await this.#closeLog();
  }

  async #closeLog(): Promise<void> {
    const log = this.#log;
    this.#log = undefined;
    await log?.close().catch(() => {});
  }

  async #drainQueue(): Promise<void> {
    while (this.#next !== undefined) {
      const { deltas, whole, version, waiters } = this.#next;
      this.#next = undefined;
      const onDisk = this.#onDisk;
      const appends =
        deltas !== undefined &&
        onDisk !== undefined &&
        deltas[0]!.baseVersion === onDisk.version &&
        onDisk.logBytes <= onDisk.wholeBytes * COMPACT_AT_SHARE;
      const result = appends ? await this.#append(deltas) : await this.#writeWhole(whole);
      if (!result.ok) this.#onDisk = undefined;
      for (const waiter of waiters)
        waiter(result.ok ? { ok: true, version: Number(version) } : result);
    }
    this.#writing = undefined;
  }

  async #append(deltas: SnapshotDelta[]): Promise<SaveResult> {
    const onDisk = this.#onDisk!;
    const records = encodeDeltaRecords(deltas);
    const fresh = onDisk.logBytes === 0;
    try {
      // A fresh log starts with its header; "w" also drops whatever an older process left.
      if (fresh) await this.#closeLog();
      this.#log ??= await open(this.logPath, fresh ? "w" : "a", 0o600);
      await this.#log.writeFile(fresh ? Buffer.concat([deltaLogHeader(), records]) : records);
      await this.#log.sync();
      // A new file's name is made durable too, or a crash could lose the whole log.
      if (fresh) await syncDirectory(this.dir);
    } catch (err) {
      await this.#closeLog();
      return { ok: false, reason: `cannot append to ${this.logPath}: ${(err as Error).message}` };
    }
    const last = deltas[deltas.length - 1]!;
    this.#onDisk = {
      version: last.version,
      wholeBytes: onDisk.wholeBytes,
      logBytes: onDisk.logBytes + records.length + (fresh ? deltaLogHeader().length : 0),
    };
    return { ok: true, version: Number(last.version) };
  }

  async #writeWhole(whole: () => Snapshot): Promise<SaveResult> {
    let snapshot: Snapshot;
    try {
      snapshot = whole();
    } catch (err) {
      // Not the disk's fault, but the queue must go on: the waiters hear why.
      return { ok: false, reason: `cannot put the snapshot together: ${(err as Error).message}` };
    }
    return this.#write(snapshot);
  }

  async #write(snapshot: Snapshot): Promise<SaveResult> {
    const temp = `${this.path}.tmp-${process.pid}`;
    try {
      await mkdir(this.dir, { recursive: true });
      const file = await encodeCacheFileInTurns(snapshot);
      const handle = await open(temp, "w", 0o600);
      try {
        await handle.writeFile(file);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, this.path);
      // The deltas are in the whole file now (and older than it: reading would skip them).
      await this.#closeLog();
      await unlink(this.logPath).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== "ENOENT") throw err;
      });
      await syncDirectory(this.dir);
      this.#onDisk = { version: snapshot.version, wholeBytes: file.length, logBytes: 0 };
      return { ok: true, version: Number(snapshot.version) };
    } catch (err) {
      await unlink(temp).catch(() => {});
      return { ok: false, reason: `cannot write ${this.path}: ${(err as Error).message}` };
    }
  }
}

/** Makes the rename itself durable; a file system that cannot fsync a directory is let be. */
async function syncDirectory(dir: string): Promise<void> {
  try {
    const handle = await open(dir, "r");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // EISDIR/EINVAL on some platforms: the data itself is already synced.
  }
}
