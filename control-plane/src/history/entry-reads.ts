/**
 * Reading the history: entry keys first, then the values of only the entries wanted, then the
 * chunks (undo steps, long change lists) of only the entries that need them.
 *
 * Why in that order: a history of big writes holds far more in its chunks than in its entries,
 * and listing it or rebuilding a recent version must not read what it does not use.
 */
import { z } from "zod";
import { readChanges } from "../journal/change-list.js";
import type { KeyValue, Store } from "../store/store.js";
import {
  type HistoryItem,
  storedHistoryEntrySchema,
  summarize,
  type UndoStep,
  undoStepSchema,
} from "./history-entry.js";

/** An entry's key and version, as a keys-only read gives them. */
export interface EntryKey {
  key: string;
  version: number;
}

/** An entry as read: its id (its chunks' owner), its item, and where its undo steps are. */
export interface ParsedEntry {
  id: string;
  item: HistoryItem;
  undo: UndoStep[] | null;
  undoParts: number | undefined;
  changeParts: number | undefined;
}

/** Every entry's key and version under `entries`, newest first; values are not read. */
export async function entryKeys(store: Store, entries: string): Promise<EntryKey[]> {
  const range = await store.range(entries, { keysOnly: true });
  return range.items
    .map((kv) => ({ key: kv.key, version: kv.modRevision }))
    .sort((a, b) => b.version - a.version);
}

/**
 * The entries of `keys`, newest first. An entry is written once and deleted only when
 * trimmed, so reading it after its key changes nothing; one trimmed meanwhile is left out.
 */
export async function readEntries(store: Store, keys: readonly EntryKey[]): Promise<ParsedEntry[]> {
  if (keys.length === 0) return [];
  const wanted = new Set(keys.map((key) => key.key));
  const read = await store.range(keys.map((key) => key.key));
  return entriesOf(read.items.filter((kv) => wanted.has(kv.key)));
}

/** An entry's item with its whole change list, read from its chunks when it has them. */
export async function withChanges(
  store: Store,
  changeChunks: string,
  entry: ParsedEntry,
): Promise<HistoryItem> {
  if (entry.changeParts === undefined) return entry.item;
  const changes = await readChanges(store, changeChunks, entry.id, entry.changeParts);
  // Not all there (trimmed meanwhile): the entry as stored, its summary from its counts.
  if (changes === undefined) return entry.item;
  return { ...entry.item, changes, summary: summarize(changes) };
}

/** The undo steps of an entry kept in chunks (only its own are read). */
export async function chunkSteps(
  store: Store,
  undoChunks: string,
  entry: ParsedEntry,
): Promise<UndoStep[] | undefined> {
  if (entry.undoParts === undefined) return undefined;
  const read = await store.range(`${undoChunks}${entry.id}/`);
  return stepsOf(
    read.items.map((kv) => kv.value),
    entry.undoParts,
  );
}

/** The undo steps of an entry kept in chunks, or undefined when they are not all there. */
function stepsOf(values: readonly string[] | undefined, parts: number | undefined) {
  if (parts === undefined || values === undefined || values.length !== parts) return undefined;
  const steps: UndoStep[] = [];
  for (const value of values) {
    let json: unknown;
    try {
      json = JSON.parse(value);
    } catch {
      return undefined;
    }
    const parsed = z.array(undoStepSchema).safeParse(json);
    if (!parsed.success) return undefined;
    steps.push(...parsed.data);
  }
  return steps;
}

/** Entries newest first; unreadable ones (written around the API) are skipped. */
function entriesOf(items: readonly KeyValue[]): ParsedEntry[] {
  const entries: ParsedEntry[] = [];
  for (const kv of items) {
    let json: unknown;
    try {
      json = JSON.parse(kv.value);
    } catch {
      continue;
    }
    const parsed = storedHistoryEntrySchema.safeParse(json);
    if (!parsed.success) continue;
    const { undo, undoParts, changeParts, rollback, ...rest } = parsed.data;
    const item: HistoryItem = {
      version: kv.modRevision,
      ...rest,
      summary: summarize(rest.changes),
      ...(rollback === undefined ? {} : { rollback }),
    };
    entries.push({
      id: kv.key.slice(kv.key.lastIndexOf("/") + 1),
      item,
      undo,
      undoParts,
      changeParts,
    });
  }
  return entries.sort((a, b) => b.item.version - a.item.version);
}
