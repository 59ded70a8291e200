/**
 * What the trim knows of the history in the store, from one keys-only read: every entry with
 * its version, chunk counts and size, and the chunk keys no entry owns.
 *
 * Why keys only: values are not needed to know what to trim, as an entry's name carries its
 * size (see history-keys.ts), and reading every entry and chunk would cost the whole history.
 */
import { chunkOwner } from "../journal/change-list.js";
import type { KeyValue } from "../store/store.js";
import { type HistoryPrefixes, sizeInName } from "./history-keys.js";
import type { KnownEntry } from "./trim-plan.js";

/** The entries, oldest first, and the chunk keys whose entry is gone. */
export interface KnownHistory {
  known: KnownEntry[];
  orphans: string[];
}

/**
 * `items`: the keys under the three prefixes. `maxUndoBytes`: the size of a full chunk, which
 * entries written before the budget are counted by.
 */
export function knownHistory(
  items: readonly KeyValue[],
  prefixes: HistoryPrefixes,
  maxUndoBytes: number,
): KnownHistory {
  const entries = items.filter((kv) => kv.key.startsWith(prefixes.entries));
  const undoParts = partsByOwner(items, prefixes.undo);
  const changeParts = partsByOwner(items, prefixes.changes);
  const known = entries
    .sort((a, b) => a.modRevision - b.modRevision)
    .map((kv) => {
      const id = kv.key.slice(prefixes.entries.length);
      const parts = undoParts.get(id) ?? 0;
      const listParts = changeParts.get(id) ?? 0;
      return {
        key: kv.key,
        version: kv.modRevision,
        parts,
        changeParts: listParts,
        bytes: sizeInName(id) ?? sizeUnnamed(kv.key, parts + listParts, maxUndoBytes),
      };
    });
  const ids = new Set(entries.map((kv) => kv.key.slice(prefixes.entries.length)));
  // Chunks of an entry that is gone, or of a write that failed after writing them.
  const orphans = items
    .filter((kv) => !kv.key.startsWith(prefixes.entries))
    .filter((kv) => {
      const base = kv.key.startsWith(prefixes.undo) ? prefixes.undo : prefixes.changes;
      return !ids.has(chunkOwner(base, kv.key));
    })
    .map((kv) => kv.key);
  return { known, orphans };
}

/**
 * An entry written before the budget, whose name carries no size: each chunk counted as a
 * full one (a quarter of a commit), the entry as its key. The embedded store has no commit
 * limit and keeps undo steps in one chunk, of unknown size: counted as none.
 */
function sizeUnnamed(key: string, chunks: number, maxUndoBytes: number): number {
  const perChunk = Number.isFinite(maxUndoBytes) ? maxUndoBytes : 0;
  return Buffer.byteLength(key) + chunks * perChunk;
}

/** How many chunk keys under `base` each entry id has. */
function partsByOwner(items: readonly KeyValue[], base: string): Map<string, number> {
  const parts = new Map<string, number>();
  for (const kv of items) {
    if (!kv.key.startsWith(base)) continue;
    const id = chunkOwner(base, kv.key);
    parts.set(id, (parts.get(id) ?? 0) + 1);
  }
  return parts;
}
