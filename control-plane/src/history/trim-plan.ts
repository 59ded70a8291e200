/**
 * Which entries a write deletes with it: the oldest beyond historyLimit or beyond the byte
 * budget, a few at a time, never the baking rollout's (its rollback undoes it).
 *
 * Why a plan apart from the store: it is decided before the write and taken as done only once
 * the write commits, so a retried or failed attempt trims nothing; and it needs only what a
 * keys-only read gives (see known-entries.ts), never an entry's value.
 */
import { chunkKey } from "../journal/change-list.js";
import type { HistoryPrefixes } from "./history-keys.js";

/** An entry as the trim knows it: its key and version, its chunks and what it all costs in the store. */
export interface KnownEntry {
  key: string;
  version: number;
  parts: number;
  changeParts: number;
  bytes: number;
}

/** What the trim must keep within, and the version it never trims. */
export interface TrimBounds {
  /** historyLimit: versions kept. */
  limit: number;
  /** historyMaxBytes: bytes the entries and their chunks may take. */
  maxBytes: number;
  /** The baking rollout's version, if one bakes. */
  kept: number | undefined;
}

/** The entries a write deletes in its commit, and their chunk keys, deleted after it. */
export interface TrimPlan {
  entries: string[];
  chunks: string[];
}

/** Entry deletes one write carries at most, leaving room under etcd's 128 operations per commit. */
const TRIM_BATCH = 8;

/** Bytes the known entries take, their chunks included. */
export function knownBytes(known: readonly KnownEntry[]): number {
  return known.reduce((sum, entry) => sum + entry.bytes, 0);
}

/**
 * The oldest entries to delete with a write of `incoming` bytes, at most TRIM_BATCH (the
 * rest go with the next writes): beyond the limit, or beyond the byte budget; never the kept
 * version's. Their chunk keys are deleted after the commit, not in it: a big entry has
 * hundreds, more than a commit takes, and with the entry gone nothing reads them. Nothing
 * changes here until the write commits.
 */
export function planTrim(
  known: readonly KnownEntry[],
  incoming: number,
  bounds: TrimBounds,
  prefixes: HistoryPrefixes,
): TrimPlan {
  let count = known.length + 1;
  let total = knownBytes(known) + incoming;
  const entries: string[] = [];
  const chunks: string[] = [];
  for (const oldest of known) {
    if (entries.length >= TRIM_BATCH) break;
    if (count <= bounds.limit && total <= bounds.maxBytes) break;
    if (oldest.version === bounds.kept) continue;
    count--;
    total -= oldest.bytes;
    entries.push(oldest.key);
    const id = oldest.key.slice(prefixes.entries.length);
    for (let part = 0; part < oldest.parts; part++) {
      chunks.push(chunkKey(prefixes.undo, id, part));
    }
    for (let part = 0; part < oldest.changeParts; part++) {
      chunks.push(chunkKey(prefixes.changes, id, part));
    }
  }
  return { entries, chunks };
}
