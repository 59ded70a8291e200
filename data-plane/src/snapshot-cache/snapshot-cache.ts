import { mkdir, open, readFile, rename, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { Snapshot } from "@clawgate/proto";
import { decodeCacheFile, encodeCacheFileInTurns } from "./cache-file.js";

export const CACHE_FILE_NAME = "snapshot.bin";

export type LoadResult =
  | { ok: true; snapshot: Snapshot; version: number }
  | { ok: false; kind: "missing" | "corrupt" | "io"; reason: string };

export type SaveResult = { ok: true; version: number } | { ok: false; reason: string };

/**
 * The last good snapshot on disk, one file in `dir`. A write goes to a temp file, is fsynced,
 * then renamed over the old one, so a crash mid-write leaves the previous snapshot whole.
 * Saves are serialized and coalesced: while one is writing, only the newest waiting snapshot
 * is written next.
 */
export class SnapshotCache {
  readonly dir: string;
  readonly path: string;
  #writing: Promise<void> | undefined;
  #next: { snapshot: Snapshot; waiters: ((result: SaveResult) => void)[] } | undefined;

  constructor(dir: string) {
    this.dir = dir;
    this.path = join(dir, CACHE_FILE_NAME);
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
    return decoded;
  }

  /** Writes the snapshot; resolves when it (or a newer one queued behind it) is on disk. */
  save(snapshot: Snapshot): Promise<SaveResult> {
    return new Promise((resolve) => {
      if (this.#next !== undefined) {
        // A newer snapshot replaces the queued one; its waiters learn the newer outcome.
        this.#next.snapshot = snapshot;
        this.#next.waiters.push(resolve);
      } else {
        this.#next = { snapshot, waiters: [resolve] };
      }
      if (this.#writing === undefined) this.#writing = this.#drainQueue();
    });
  }

  /** Resolves once no write is in progress. */
  async flush(): Promise<void> {
    await this.#writing;
  }

  async #drainQueue(): Promise<void> {
    while (this.#next !== undefined) {
      const { snapshot, waiters } = this.#next;
      this.#next = undefined;
      const result = await this.#write(snapshot);
      for (const waiter of waiters) waiter(result);
    }
    this.#writing = undefined;
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
      await syncDirectory(this.dir);
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
