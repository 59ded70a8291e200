/**
 * Config history: every config version with its author, time and changes, and the config as
 * it was at any version kept, for GET /v1/history and POST /v1/rollback.
 *
 * Why undo steps rather than etcd's own MVCC history or full copies:
 * - etcd compacts its history (and the embedded store keeps none), so "read the store at
 *   revision V" stops working after a compaction; history must be data we own.
 * - A full copy per version costs (config size x historyLimit): 100 copies of a 10,000-route
 *   config is far beyond what etcd holds comfortably. An entry that holds only the keys its
 *   write changed, each with its value before the write, costs what the write itself cost.
 * - So the config at V is rebuilt from the current config by undoing, newest first, every entry
 *   after V. The current config and the entries come from one read at one revision, so the
 *   rebuild never mixes two moments.
 *
 * An entry is written in the commit that makes the change (like the audit event): it exists
 * exactly when the change does, its key's mod revision is the version, and it adds no revision
 * of its own. Writes made around the admin API (straight into etcd) leave no entry; undoing
 * across them would be wrong, which is why only config writes through the API are versions here.
 */
import { randomInt } from "node:crypto";
import { RESOURCE_KINDS, type ResourceKind } from "@clawgate/proto";
import type { Logger } from "pino";
import { z } from "zod";
import {
  chunkByBytes,
  chunkKey,
  chunkOwner,
  chunkPuts,
  readChanges,
  splitChanges,
} from "../journal/change-list.js";
import type { ConfigChange } from "../journal/config-event.js";
import { eventId, SEQ_MODULUS } from "../journal/event-key.js";
import { kindPrefixes, readOutsideApply } from "../resources/apply-gate.js";
import type { AlsoWrites } from "../resources/config-service.js";
import { clawgateError, type Outcome } from "../resources/errors.js";
import type { KeyValue, Operation, RangeResult, Store } from "../store/store.js";
import {
  type HistoryItem,
  type RollbackMark,
  type StoredHistoryEntry,
  storedHistoryEntrySchema,
  summarize,
  type UndoStep,
  undoStepSchema,
} from "./history-entry.js";

export interface ConfigHistoryOptions {
  store: Store;
  /** Key prefix with its trailing slash; entries go under `{prefix}history/`. */
  prefix: string;
  /** Versions kept; each write deletes the oldest beyond this in its own commit. Default 100. */
  limit?: number;
  /**
   * Bytes the entries may take in the store, their chunks included; each write deletes the
   * oldest beyond this too. Default DEFAULT_HISTORY_MAX_BYTES (256 MiB).
   */
  maxBytes?: number;
  /** Wall clock for entry times; default Date.now. */
  clock?: () => number;
  logger?: Logger;
}

/** A key a config write changes, with its value before the write (undefined: created). */
export interface KeyWrite {
  key: string;
  before: string | undefined;
}

/** One resource of a rebuilt config, in the shape POST /v1/apply takes. */
export interface HistoricResource {
  kind: ResourceKind;
  name: string;
  spec: unknown;
}

/** A config rebuilt from the history, and the store revision of the config it started from. */
export interface RebuiltConfig {
  current: number;
  resources: HistoricResource[];
}

/** Entry deletes one write carries at most, leaving room under etcd's 128 operations per commit. */
const TRIM_BATCH = 8;
/**
 * Why 256 MiB: etcd refuses every write once its database reaches its quota (2 GiB by default,
 * NOSPACE alarm). Besides the history it holds the config (50,000 resources are about 100 MB),
 * a big apply's undo records (a copy of what it replaces) and the journals, and a deleted value
 * keeps its space until etcd compacts and defragments. A history that may rewrite a 50 MB config
 * five times over still leaves that database well under its quota; a count alone (historyLimit)
 * would let 100 such rewrites take 5 GB.
 */
export const DEFAULT_HISTORY_MAX_BYTES = 256 * 1024 * 1024;
/** Chunk keys one background delete carries (see afterCommit). */
const CHUNK_DELETE_BATCH = 100;
/** Writes between re-reads of the keys, so entries other replicas wrote are trimmed too. */
const RESYNC_EVERY = 100;

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

/** An entry as the trim knows it: its key and version, its chunks and what it all costs in the store. */
interface KnownEntry {
  key: string;
  version: number;
  parts: number;
  changeParts: number;
  bytes: number;
}

/** An entry's key and version, as a keys-only read gives them. */
interface EntryKey {
  key: string;
  version: number;
}

export class ConfigHistory {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #keys: string;
  readonly #limit: number;
  readonly #maxBytes: number;
  readonly #clock: () => number;
  readonly #logger: Logger | undefined;
  /**
   * Undo steps go in chunks of at most this size beside the entry: a quarter of a commit, so
   * the entry itself stays small in whatever commit carries it.
   */
  readonly #maxUndoBytes: number;
  /** Entry keys, oldest first, with their version, chunks and bytes: only committed writes. */
  #known: KnownEntry[] = [];
  /** Chunk keys whose entry is gone, to delete after the next write that commits. */
  #orphans: string[] = [];
  readonly #chunks: string;
  readonly #changeChunks: string;
  #sinceResync = 0;
  #seq = randomInt(SEQ_MODULUS);
  /** The version whose entry is never trimmed (a baking rollout's; see keep()). */
  #kept: () => number | undefined = () => undefined;

  constructor(options: ConfigHistoryOptions) {
    this.#store = options.store;
    this.#prefix = options.prefix;
    this.#keys = historyPrefix(options.prefix);
    this.#chunks = historyUndoPrefix(options.prefix);
    this.#changeChunks = historyChangesPrefix(options.prefix);
    this.#limit = options.limit ?? 100;
    this.#maxBytes = options.maxBytes ?? DEFAULT_HISTORY_MAX_BYTES;
    this.#clock = options.clock ?? Date.now;
    this.#logger = options.logger;
    this.#maxUndoBytes = Math.floor(options.store.txnLimits.maxBytes / 4);
    if (!Number.isInteger(this.#limit) || this.#limit < 1) {
      throw new RangeError(`historyLimit must be a positive integer, got ${this.#limit}`);
    }
    if (!Number.isInteger(this.#maxBytes) || this.#maxBytes < 1) {
      throw new RangeError(`historyMaxBytes must be a positive integer, got ${this.#maxBytes}`);
    }
  }

  /** Reads the keys there are, so the first writes already trim the oldest. */
  async start(): Promise<void> {
    await this.#resync();
  }

  /**
   * Never trims the entry of the version `version()` names while it names one: a baking
   * rollout's, which its rollback undoes whatever historyLimit is.
   */
  keep(version: () => number | undefined): void {
    this.#kept = version;
  }

  /**
   * The writes that record a config write made by `author`, to commit with the write itself:
   * the entry, and deletes of the oldest entries beyond the limit or the byte budget, never the
   * kept version's (their chunks are deleted once that commit is made: afterCommit). None when
   * nothing changes. The undo steps, and change lists too big for the commit, go `ahead` as
   * chunk keys apart from the entry (see AlsoWrites), so listing entries never reads undo steps
   * and a write of any size the apply takes can be undone and listed, a rollback included.
   * Nothing is taken as written until `committed`: a retried attempt leaves no phantom key.
   *
   * An entry bigger than the whole budget on its own (a write replacing more config than
   * historyMaxBytes) is still kept, since without it no version before it could be restored:
   * every older entry is trimmed instead, and a warning says so.
   */
  operations(
    author: string | undefined,
    changes: readonly ConfigChange[],
    writes: readonly KeyWrite[],
    rollback?: RollbackMark,
  ): AlsoWrites {
    if (changes.length === 0 || writes.length === 0) return { commit: [], ahead: [] };
    const now = this.#clock();
    const event = eventId(now, this.#seq++);
    const undo: UndoStep[] = writes.map((write) => ({
      key: write.key.slice(this.#prefix.length),
      before: write.before ?? null,
    }));
    const chunks = chunkByBytes(undo, this.#maxUndoBytes);
    // An eighth of a commit inline, like the audit event's: both ride the same closing commit.
    const listed = splitChanges(changes, this.#maxUndoBytes / 2, this.#maxUndoBytes);
    const undoValues = chunks.map((steps) => JSON.stringify(steps));
    const aheadOf = (id: string) => [
      ...chunkPuts(this.#chunks, id, undoValues),
      ...chunkPuts(this.#changeChunks, id, listed.parts),
    ];
    const entry: StoredHistoryEntry = {
      time: new Date(now).toISOString(),
      author: author ?? "anonymous",
      changes: listed.inline,
      ...(listed.parts.length === 0 ? {} : { changeParts: listed.parts.length }),
      ...(rollback === undefined ? {} : { rollback }),
      undo: null,
      undoParts: chunks.length,
    };
    const value = JSON.stringify(entry);
    // The size goes in the entry's name, which is as long whatever the size: measured with a
    // stand-in name, it is what the entry and its chunks take under the real one.
    const measured = entryName(event, 0);
    const bytes =
      Buffer.byteLength(`${this.#keys}${measured}`) +
      Buffer.byteLength(value) +
      aheadOf(measured).reduce((sum, op) => sum + operationBytes(op), 0);
    const id = entryName(event, bytes);
    const key = `${this.#keys}${id}`;
    const ahead = aheadOf(id);
    const trimmed = this.#trim(bytes);
    // The trimmed entries' chunks and those found without an entry, deleted once this commits.
    const garbage = [...trimmed.chunks, ...this.#orphans];
    return {
      commit: [
        { type: "put", key, value },
        ...trimmed.entries.map((old): Operation => ({ type: "delete", key: old })),
      ],
      ahead,
      committed: (version) => {
        const gone = new Set(trimmed.entries);
        const deleted = new Set(garbage);
        this.#known = this.#known.filter((known) => !gone.has(known.key));
        this.#orphans = this.#orphans.filter((chunk) => !deleted.has(chunk));
        this.#known.push({
          key,
          version,
          parts: chunks.length,
          changeParts: listed.parts.length,
          bytes,
        });
        if (bytes > this.#maxBytes) {
          this.#logger?.warn(
            { bytes, historyMaxBytes: this.#maxBytes, resources: changes.length, version },
            "config history: this write's undo alone exceeds historyMaxBytes; it is kept (so it can be rolled back) and every older version is trimmed",
          );
        }
        if (++this.#sinceResync >= RESYNC_EVERY) {
          this.#resync().catch((error: unknown) =>
            this.#logger?.warn({ err: error }, "config history keys could not be re-read"),
          );
        }
      },
      ...(garbage.length === 0 ? {} : { afterCommit: () => this.#deleteChunks(garbage) }),
    };
  }

  /** Bytes the kept entries take, their chunks included, as last read plus written since. */
  get bytes(): number {
    return this.#known.reduce((sum, entry) => sum + entry.bytes, 0);
  }

  /**
   * The oldest entries to delete with a write of `incoming` bytes, at most TRIM_BATCH (the
   * rest go with the next writes): beyond the limit, or beyond the byte budget; never the kept
   * version's. Their chunk keys are deleted after the commit, not in it: a big entry has
   * hundreds, more than a commit takes, and with the entry gone nothing reads them. Nothing
   * changes here until the write commits.
   */
  #trim(incoming: number): { entries: string[]; chunks: string[] } {
    const kept = this.#kept();
    let count = this.#known.length + 1;
    let total = this.bytes + incoming;
    const entries: string[] = [];
    const chunks: string[] = [];
    for (const oldest of this.#known) {
      if (entries.length >= TRIM_BATCH) break;
      if (count <= this.#limit && total <= this.#maxBytes) break;
      if (oldest.version === kept) continue;
      count--;
      total -= oldest.bytes;
      entries.push(oldest.key);
      const id = oldest.key.slice(this.#keys.length);
      for (let part = 0; part < oldest.parts; part++) {
        chunks.push(chunkKey(this.#chunks, id, part));
      }
      for (let part = 0; part < oldest.changeParts; part++) {
        chunks.push(chunkKey(this.#changeChunks, id, part));
      }
    }
    return { entries, chunks };
  }

  /**
   * Deletes chunk keys whose entry a committed write deleted, in commits of their own. One that
   * fails is left to the next re-read of the keys, which finds it without an entry.
   */
  async #deleteChunks(keys: readonly string[]): Promise<void> {
    const batch = Math.max(1, Math.min(this.#store.txnLimits.maxOps, CHUNK_DELETE_BATCH));
    try {
      for (let i = 0; i < keys.length; i += batch) {
        await this.#store.commit(
          [],
          keys.slice(i, i + batch).map((key): Operation => ({ type: "delete", key })),
        );
      }
    } catch (error) {
      this.#logger?.warn(
        { err: error },
        "config history: trimmed undo chunks could not be deleted",
      );
    }
  }

  /** An entry's item with its whole change list, read from its chunks when it has them. */
  async #withChanges(entry: ParsedEntry): Promise<HistoryItem> {
    if (entry.changeParts === undefined) return entry.item;
    const changes = await readChanges(this.#store, this.#changeChunks, entry.id, entry.changeParts);
    // Not all there (trimmed meanwhile): the entry as stored, its summary from its counts.
    if (changes === undefined) return entry.item;
    return { ...entry.item, changes, summary: summarize(changes) };
  }

  /** Versions kept, newest first, at most `limit`: only those entries are read. */
  async list(limit = this.#limit): Promise<HistoryItem[]> {
    const newest = (await this.#entryKeys()).slice(0, Math.max(0, limit));
    return Promise.all((await this.#entries(newest)).map((entry) => this.#withChanges(entry)));
  }

  /**
   * The config as it was at `version`, rebuilt from the current config by undoing every later
   * entry. VERSION_NOT_FOUND when no kept entry has that version, VERSION_TOO_OLD when it is
   * older than what is kept (or than an entry too big to undo).
   */
  async at(
    version: number,
    options: { atOrBefore?: boolean } = {},
  ): Promise<Outcome<RebuiltConfig & { item: HistoryItem }>> {
    // During a big apply, the config as it was before it, like every other read. Entries only
    // commit with the closing commit of a write, so reading them after it misses none.
    const read = await readOutsideApply(this.#store, this.#prefix, kindPrefixes(this.#prefix));
    const keys = await this.#entryKeys();
    const oldest = keys.at(-1)?.version;
    // atOrBefore: `version` is a published snapshot's. A snapshot also holds the registered
    // nodes, whose registrations and expiries make versions of their own that are no history
    // entry; the config then is the newest entry at or before it (keys are newest first).
    const targetKey = keys.find((key) =>
      options.atOrBefore === true ? key.version <= version : key.version === version,
    );
    const entries =
      targetKey === undefined
        ? []
        : await this.#entries(keys.filter((key) => key.version >= targetKey.version));
    const target = entries.find(({ item }) => item.version === targetKey?.version);
    if (target === undefined) {
      if (oldest !== undefined && version > 0 && version < oldest) {
        return tooOld(`version ${version} is older than the oldest kept (${oldest})`);
      }
      const known =
        oldest === undefined ? "none is kept yet" : `kept: ${oldest} to ${keys[0]?.version}`;
      return {
        ok: false,
        error: clawgateError(
          "CLAWGATE_VERSION_NOT_FOUND",
          `version ${version} is not a config version in the history (${known})`,
        ),
      };
    }
    const rebuilt = await this.#undo(read, entries, target.item.version);
    return rebuilt.ok ? { ...rebuilt, item: await this.#withChanges(target) } : rebuilt;
  }

  /**
   * The config as it was at `base` (a rollout's base: a published snapshot's version, which
   * need not be a config version nor have a kept entry), rebuilt by undoing every kept entry
   * newer than it. Writes are refused while a rollout bakes, so the rollout's own entry (of
   * version `own`, never trimmed while it bakes) is all there is to undo; it must be there.
   */
  async before(base: number, own: number): Promise<Outcome<RebuiltConfig>> {
    const read = await readOutsideApply(this.#store, this.#prefix, kindPrefixes(this.#prefix));
    const entries = await this.#entries(
      (await this.#entryKeys()).filter((key) => key.version > base),
    );
    if (!entries.some(({ item }) => item.version === own)) {
      return tooOld(`the history entry of version ${own} is not kept, so it cannot be undone`);
    }
    return this.#undo(read, entries, base);
  }

  /**
   * Whether every kept entry newer than `base` can be undone (a rollout's check before it
   * starts: its rollback undoes them and its own). VERSION_TOO_OLD naming the one that cannot.
   */
  async undoable(base: number): Promise<Outcome<{ base: number }>> {
    const entries = await this.#entries(
      (await this.#entryKeys()).filter((key) => key.version > base),
    );
    for (const entry of entries) {
      if (entry.undo === null && entry.undoParts === undefined) return noUndo(entry.item.version);
    }
    return { ok: true, base };
  }

  /** `read` (the config at read.revision) with every entry newer than `after` undone. */
  async #undo(
    read: RangeResult,
    entries: readonly ParsedEntry[],
    after: number,
  ): Promise<Outcome<RebuiltConfig>> {
    const config = new Map<string, string>();
    for (const kv of read.items) config.set(kv.key.slice(this.#prefix.length), kv.value);
    for (const entry of entries) {
      const { item } = entry;
      if (item.version <= after) break;
      const undo = entry.undo ?? (await this.#chunkSteps(entry));
      if (undo === undefined) return noUndo(item.version);
      for (const step of undo) {
        if (step.before === null) config.delete(step.key);
        else config.set(step.key, step.before);
      }
    }
    return { ok: true, current: read.revision, resources: resourcesOf(config) };
  }

  /** The undo steps of an entry kept in chunks (only its own are read). */
  async #chunkSteps(entry: ParsedEntry): Promise<UndoStep[] | undefined> {
    if (entry.undoParts === undefined) return undefined;
    const read = await this.#store.range(`${this.#chunks}${entry.id}/`);
    return stepsOf(
      read.items.map((kv) => kv.value),
      entry.undoParts,
    );
  }

  /** Every entry's key and version, newest first; values are not read. */
  async #entryKeys(): Promise<EntryKey[]> {
    const range = await this.#store.range(this.#keys, { keysOnly: true });
    return range.items
      .map((kv) => ({ key: kv.key, version: kv.modRevision }))
      .sort((a, b) => b.version - a.version);
  }

  /**
   * The entries of `keys`, newest first. An entry is written once and deleted only when
   * trimmed, so reading it after its key changes nothing; one trimmed meanwhile is left out.
   */
  async #entries(keys: readonly EntryKey[]): Promise<ParsedEntry[]> {
    if (keys.length === 0) return [];
    const wanted = new Set(keys.map((key) => key.key));
    const read = await this.#store.range(keys.map((key) => key.key));
    return entriesOf(read.items.filter((kv) => wanted.has(kv.key)));
  }

  /**
   * An entry written before the budget, whose name carries no size: each chunk counted as a
   * full one (a quarter of a commit), the entry as its key. The embedded store has no commit
   * limit and keeps undo steps in one chunk, of unknown size: counted as none.
   */
  #sizeUnnamed(key: string, chunks: number): number {
    const perChunk = Number.isFinite(this.#maxUndoBytes) ? this.#maxUndoBytes : 0;
    return Buffer.byteLength(key) + chunks * perChunk;
  }

  /**
   * Entry and chunk keys only: values are not needed to know what to trim, as an entry's name
   * carries its size (see entryName).
   */
  async #resync(): Promise<void> {
    this.#sinceResync = 0;
    const range = await this.#store.range([this.#keys, this.#chunks, this.#changeChunks], {
      keysOnly: true,
    });
    const entries = range.items.filter((kv) => kv.key.startsWith(this.#keys));
    const undoParts = partsByOwner(range.items, this.#chunks);
    const changeParts = partsByOwner(range.items, this.#changeChunks);
    this.#known = entries
      .sort((a, b) => a.modRevision - b.modRevision)
      .map((kv) => {
        const id = kv.key.slice(this.#keys.length);
        const parts = undoParts.get(id) ?? 0;
        const listParts = changeParts.get(id) ?? 0;
        return {
          key: kv.key,
          version: kv.modRevision,
          parts,
          changeParts: listParts,
          bytes: sizeInName(id) ?? this.#sizeUnnamed(kv.key, parts + listParts),
        };
      });
    const ids = new Set(entries.map((kv) => kv.key.slice(this.#keys.length)));
    // Chunks of an entry that is gone, or of a write that failed after writing them.
    this.#orphans = range.items
      .filter((kv) => !kv.key.startsWith(this.#keys))
      .filter((kv) => {
        const base = kv.key.startsWith(this.#chunks) ? this.#chunks : this.#changeChunks;
        return !ids.has(chunkOwner(base, kv.key));
      })
      .map((kv) => kv.key);
  }
}

interface ParsedEntry {
  id: string;
  item: HistoryItem;
  undo: UndoStep[] | null;
  undoParts: number | undefined;
  changeParts: number | undefined;
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

/** The size an entry's name carries; undefined for names written before the budget. */
function sizeInName(id: string): number | undefined {
  const match = /\.(\d+)$/.exec(id);
  return match === null ? undefined : Number(match[1]);
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

/** Bytes one put or delete takes in the store. */
function operationBytes(operation: Operation): number {
  const value = operation.type === "put" ? Buffer.byteLength(operation.value) : 0;
  return Buffer.byteLength(operation.key) + value;
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

/** `routes/api` -> a resource; keys of other kinds or unreadable values are left out. */
function resourcesOf(config: ReadonlyMap<string, string>): HistoricResource[] {
  const resources: HistoricResource[] = [];
  for (const [key, value] of config) {
    const slash = key.indexOf("/");
    const kind = key.slice(0, slash) as ResourceKind;
    if (slash < 0 || !RESOURCE_KINDS.includes(kind)) continue;
    try {
      resources.push({ kind, name: key.slice(slash + 1), spec: JSON.parse(value) });
    } catch {
      // Not JSON: it was written around the API and is not config the API can restore.
    }
  }
  return resources.sort((a, b) =>
    a.kind === b.kind ? a.name.localeCompare(b.name) : a.kind.localeCompare(b.kind),
  );
}

function noUndo(version: number) {
  return tooOld(
    `version ${version} has no undo steps kept (written before they were kept in chunks), so versions before it cannot be rebuilt`,
  );
}

function tooOld(message: string): { ok: false; error: ReturnType<typeof clawgateError> } {
  return { ok: false, error: clawgateError("CLAWGATE_VERSION_TOO_OLD", message) };
}
