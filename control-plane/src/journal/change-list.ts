import { z } from "zod";
import type { KeyValue, Operation, Store } from "../store/store.js";
import { type ConfigChange, configChangeSchema } from "./config-event.js";

/**
 * A journal entry's list of changed resources, kept inline when small and in chunk keys beside
 * the entry when not. An apply of 20,000 resources lists about 1 MB of changes; the audit event
 * and the history entry both commit in the one transaction that makes the apply visible, which
 * etcd caps at 1.5 MiB, so a long list is written ahead in chunks (as the history's undo steps
 * are) and the entry keeps only how many there are.
 */
export interface SplitChanges {
  /** Stored in the entry: the whole list, or [] when it is in chunks. */
  inline: ConfigChange[];
  /** JSON values of the chunks, in order; empty when the list is inline. */
  parts: string[];
}

/**
 * Inline up to `inlineBytes` of JSON (an eighth of a commit, so the audit event and the history
 * entry together stay well inside the commit that closes a big apply), else chunks of about
 * `chunkBytes` each (a quarter of a commit, so each fits a staged batch).
 */
export function splitChanges(
  changes: readonly ConfigChange[],
  inlineBytes: number,
  chunkBytes: number,
): SplitChanges {
  if (Buffer.byteLength(JSON.stringify(changes)) <= inlineBytes) {
    return { inline: [...changes], parts: [] };
  }
  return {
    inline: [],
    parts: chunkByBytes(changes, chunkBytes).map((chunk) => JSON.stringify(chunk)),
  };
}

/**
 * Splits items into groups of about `bytes` of JSON each; an item bigger than that gets a group
 * of its own.
 */
export function chunkByBytes<T>(items: readonly T[], bytes: number): T[][] {
  const chunks: T[][] = [];
  let chunk: T[] = [];
  let size = 2;
  for (const item of items) {
    const cost = Buffer.byteLength(JSON.stringify(item)) + 1;
    if (chunk.length > 0 && size + cost > bytes) {
      chunks.push(chunk);
      chunk = [];
      size = 2;
    }
    chunk.push(item);
    size += cost;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/** `{base}{id}/000003`: chunk keys sort in order under their entry's id. */
export function chunkKey(base: string, id: string, part: number): string {
  return `${base}${id}/${String(part).padStart(6, "0")}`;
}

/** The puts that write `parts` ahead of the entry that refers to them. */
export function chunkPuts(base: string, id: string, parts: readonly string[]): Operation[] {
  return parts.map((value, part) => ({ type: "put", key: chunkKey(base, id, part), value }));
}

/** The entry id a chunk key belongs to. */
export function chunkOwner(base: string, key: string): string {
  return key.slice(base.length, key.lastIndexOf("/"));
}

/** The whole list of an entry kept in `parts` chunks; undefined when they are not all there. */
export async function readChanges(
  store: Store,
  base: string,
  id: string,
  parts: number,
): Promise<ConfigChange[] | undefined> {
  const read = await store.range(`${base}${id}/`);
  return changesOf(read.items, parts);
}

/** Parses the chunk values of one entry; undefined when any is missing or unreadable. */
export function changesOf(items: readonly KeyValue[], parts: number): ConfigChange[] | undefined {
  if (items.length !== parts) return undefined;
  const changes: ConfigChange[] = [];
  for (const item of items) {
    let json: unknown;
    try {
      json = JSON.parse(item.value);
    } catch {
      return undefined;
    }
    const parsed = z.array(configChangeSchema).safeParse(json);
    if (!parsed.success) return undefined;
    changes.push(...parsed.data);
  }
  return changes;
}
