/**
 * Where the history lives in the store, and an entry's name, which carries its size.
 *
 * Why the size is in the name: trimming to historyMaxBytes must know what every entry costs,
 * and a keys-only read is all it can afford (an entry's chunks can be hundreds of keys of a
 * quarter of a commit each); so the name says it, and no entry or chunk is read to trim.
 */
import type { Operation } from "../store/store.js";

export function historyPrefix(prefix: string): string {
  return `${prefix}history/`;
}

/** Undo chunks live apart from entries, so listing the history never reads them. */
export function historyUndoPrefix(prefix: string): string {
  return `${prefix}history-undo/`;
}

/** Change lists too long for an entry's commit, in chunks apart from the entries. */
export function historyChangesPrefix(prefix: string): string {
  return `${prefix}history-changes/`;
}

/** The three key prefixes of one history: its entries, their undo chunks, their change chunks. */
export interface HistoryPrefixes {
  entries: string;
  undo: string;
  changes: string;
}

export function historyPrefixes(prefix: string): HistoryPrefixes {
  return {
    entries: historyPrefix(prefix),
    undo: historyUndoPrefix(prefix),
    changes: historyChangesPrefix(prefix),
  };
}

/** Digits of the size in an entry's name: up to a terabyte, and every name as long. */
const SIZE_DIGITS = 12;

/**
 * `{eventId}.{bytes}`: an entry's name (its key under history/, and its chunks' owner) carries
 * what the entry and its chunks take in the store, so trimming to historyMaxBytes knows every
 * entry's size from a keys-only read, never reading an entry or a chunk.
 */
function entryName(event: string, bytes: number): string {
  return `${event}.${String(bytes).padStart(SIZE_DIGITS, "0")}`;
}

/**
 * The name of the entry of `event` whose value is `value` and whose chunks are the puts
 * `aheadOf(name)` makes, and the bytes it all takes in the store.
 */
export function sizedEntryName(
  entries: string,
  event: string,
  value: string,
  aheadOf: (id: string) => readonly Operation[],
): { id: string; bytes: number } {
  // The size goes in the entry's name, which is as long whatever the size: measured with a
  // stand-in name, it is what the entry and its chunks take under the real one.
  const measured = entryName(event, 0);
  const bytes =
    Buffer.byteLength(`${entries}${measured}`) +
    Buffer.byteLength(value) +
    aheadOf(measured).reduce((sum, op) => sum + operationBytes(op), 0);
  return { id: entryName(event, bytes), bytes };
}

/** The size an entry's name carries; undefined for names written before the budget. */
export function sizeInName(id: string): number | undefined {
  const match = /\.(\d+)$/.exec(id);
  return match === null ? undefined : Number(match[1]);
}

/** Bytes one put or delete takes in the store. */
function operationBytes(operation: Operation): number {
  const value = operation.type === "put" ? Buffer.byteLength(operation.value) : 0;
  return Buffer.byteLength(operation.key) + value;
}
