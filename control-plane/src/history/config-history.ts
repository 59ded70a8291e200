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
import type { KeyValue, Operation, Store } from "../store/store.js";
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

/** An entry as the trim knows it: its key, its chunks and what it all costs in the store. */
interface KnownEntry {
  key: string;
  parts: number;
  changeParts: number;
  bytes: number;
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
   * Undo steps bigger than this go in chunks of this size beside the entry: a quarter of a
   * commit, so the entry itself stays small in whatever commit carries it.
   */
  readonly #maxUndoBytes: number;
  /** Entry keys, oldest first, with their chunks and bytes. */
  #known: KnownEntry[] = [];
  /** Chunk keys whose entry is gone, to delete after the next write. */
  #orphans: string[] = [];
  readonly #chunks: string;
  readonly #changeChunks: string;
  #sinceResync = 0;
  #seq = randomInt(SEQ_MODULUS);

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
   * The writes that record a config write made by `author`, to commit with the write itself:
   * the entry, and deletes of the oldest entries beyond the limit or the byte budget (their
   * chunks are deleted once that commit is made: afterCommit). None when nothing changes. Undo
   * steps and change lists too big for the commit go `ahead` as chunk keys (see AlsoWrites), so
   * a write of any size the apply takes can be undone and listed, a rollback included.
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
    const id = eventId(now, this.#seq++);
    const key = `${this.#keys}${id}`;
    const undo: UndoStep[] = writes.map((write) => ({
      key: write.key.slice(this.#prefix.length),
      before: write.before ?? null,
    }));
    const chunks =
      Buffer.byteLength(JSON.stringify(undo)) > this.#maxUndoBytes
        ? chunkByBytes(undo, this.#maxUndoBytes)
        : undefined;
    // An eighth of a commit inline, like the audit event's: both ride the same closing commit.
    const listed = splitChanges(changes, this.#maxUndoBytes / 2, this.#maxUndoBytes);
    const ahead = [
      ...chunkPuts(
        this.#chunks,
        id,
        (chunks ?? []).map((steps) => JSON.stringify(steps)),
      ),
      ...chunkPuts(this.#changeChunks, id, listed.parts),
    ];
    const entry: StoredHistoryEntry = {
      time: new Date(now).toISOString(),
      author: author ?? "anonymous",
      changes: listed.inline,
      ...(listed.parts.length === 0 ? {} : { changeParts: listed.parts.length }),
      ...(rollback === undefined ? {} : { rollback }),
      undo: chunks === undefined ? undo : null,
      ...(chunks === undefined ? {} : { undoParts: chunks.length }),
    };
    const aheadBytes = ahead.reduce((sum, op) => sum + operationBytes(op), 0);
    // The entry's own size, its `bytes` field included (at most a dozen digits).
    const bytes =
      Buffer.byteLength(key) + Buffer.byteLength(JSON.stringify(entry)) + 24 + aheadBytes;
    const value = JSON.stringify({ ...entry, bytes });
    const trimmed = this.#trim(bytes);
    if (bytes > this.#maxBytes) {
      this.#logger?.warn(
        { bytes, historyMaxBytes: this.#maxBytes, resources: changes.length },
        "config history: this write's undo alone exceeds historyMaxBytes; it is kept (so it can be rolled back) and every older version is trimmed",
      );
    }
    this.#known.push({
      key,
      parts: chunks?.length ?? 0,
      changeParts: listed.parts.length,
      bytes,
    });
    if (++this.#sinceResync >= RESYNC_EVERY) {
      this.#resync().catch((error: unknown) =>
        this.#logger?.warn({ err: error }, "config history keys could not be re-read"),
      );
    }
    const orphans = [...trimmed.chunks, ...this.#orphans.splice(0)];
    return {
      commit: [
        { type: "put", key, value },
        ...trimmed.entries.map((old): Operation => ({ type: "delete", key: old })),
      ],
      ahead,
      ...(orphans.length === 0 ? {} : { afterCommit: () => this.#deleteChunks(orphans) }),
    };
  }

  /** Bytes the kept entries take, their chunks included, as last read plus written since. */
  get bytes(): number {
    return this.#known.reduce((sum, entry) => sum + entry.bytes, 0);
  }

  /**
   * The oldest entries to delete with a write of `incoming` bytes, at most TRIM_BATCH (the
   * rest go with the next writes): beyond the limit, or beyond the byte budget. Their chunk
   * keys are deleted after the commit, not in it: a big entry has hundreds, more than a commit
   * takes, and with the entry gone nothing reads them.
   */
  #trim(incoming: number): { entries: string[]; chunks: string[] } {
    let total = this.bytes + incoming;
    const entries: string[] = [];
    const chunks: string[] = [];
    while (
      entries.length < TRIM_BATCH &&
      (this.#known.length + 1 > this.#limit || total > this.#maxBytes)
    ) {
      const oldest = this.#known.shift();
      if (oldest === undefined) break;
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

  /** Versions kept, newest first, at most `limit`. */
  async list(limit = this.#limit): Promise<HistoryItem[]> {
    const range = await this.#store.range(this.#keys);
    return Promise.all(
      entriesOf(range.items)
        .slice(0, limit)
        .map((entry) => this.#withChanges(entry)),
    );
  }

  /**
   * The config as it was at `version`, rebuilt from the current config by undoing every later
   * entry. VERSION_NOT_FOUND when no kept entry has that version, VERSION_TOO_OLD when it is
   * older than what is kept (or than an entry too big to undo).
   */
  async at(
    version: number,
    options: { atOrBefore?: boolean } = {},
  ): Promise<Outcome<{ item: HistoryItem; current: number; resources: HistoricResource[] }>> {
    // During a big apply, the config as it was before it, like every other read.
    const read = await readOutsideApply(this.#store, this.#prefix, [
      ...kindPrefixes(this.#prefix),
      this.#keys,
      this.#chunks,
    ]);
    const entries = entriesOf(read.items.filter((kv) => kv.key.startsWith(this.#keys)));
    const chunks = new Map<string, string[]>();
    for (const kv of read.items) {
      if (!kv.key.startsWith(this.#chunks)) continue;
      const id = kv.key.slice(this.#chunks.length, kv.key.lastIndexOf("/"));
      chunks.set(id, [...(chunks.get(id) ?? []), kv.value]);
    }
    const oldest = entries.at(-1)?.item.version;
    // atOrBefore: `version` is a published snapshot's. A snapshot also holds the registered
    // nodes, whose registrations and expiries make versions of their own that are no history
    // entry; the config then is the newest entry at or before it (entries are newest first).
    const target = entries.find(({ item }) =>
      options.atOrBefore === true ? item.version <= version : item.version === version,
    );
    if (target === undefined) {
      if (oldest !== undefined && version > 0 && version < oldest) {
        return tooOld(`version ${version} is older than the oldest kept (${oldest})`);
      }
      const known =
        oldest === undefined
          ? "none is kept yet"
          : `kept: ${oldest} to ${entries[0]?.item.version}`;
      return {
        ok: false,
        error: clawgateError(
          "CLAWGATE_VERSION_NOT_FOUND",
          `version ${version} is not a config version in the history (${known})`,
        ),
      };
    }
    const config = new Map<string, string>();
    for (const kv of read.items) {
      if (!kv.key.startsWith(this.#keys) && !kv.key.startsWith(this.#chunks)) {
        config.set(kv.key.slice(this.#prefix.length), kv.value);
      }
    }
    for (const entry of entries) {
      const { item } = entry;
      if (item.version <= version) break;
      const undo = entry.undo ?? stepsOf(chunks.get(entry.id), entry.undoParts);
      if (undo === undefined) {
        return tooOld(
          `version ${item.version} has no undo steps kept (written before they were kept in chunks), so versions before it cannot be rebuilt`,
        );
      }
      for (const step of undo) {
        if (step.before === null) config.delete(step.key);
        else config.set(step.key, step.before);
      }
    }
    const item = await this.#withChanges(target);
    return { ok: true, item, current: read.revision, resources: resourcesOf(config) };
  }

  async #resync(): Promise<void> {
    this.#sinceResync = 0;
    const range = await this.#store.range([this.#keys, this.#chunks, this.#changeChunks]);
    const entries = range.items.filter((kv) => kv.key.startsWith(this.#keys));
    this.#known = entries
      .sort((a, b) => a.modRevision - b.modRevision)
      .map((kv) => ({ key: kv.key, ...partsOf(kv) }));
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

/**
 * How many chunks a stored entry has and what it costs (its value's size when it does not say:
 * written before the budget, or unreadable).
 */
function partsOf(kv: KeyValue): Omit<KnownEntry, "key"> {
  const size = Buffer.byteLength(kv.key) + Buffer.byteLength(kv.value);
  try {
    const parsed = storedHistoryEntrySchema.safeParse(JSON.parse(kv.value));
    if (!parsed.success) return { parts: 0, changeParts: 0, bytes: size };
    const { undoParts, changeParts, bytes } = parsed.data;
    return { parts: undoParts ?? 0, changeParts: changeParts ?? 0, bytes: bytes ?? size };
  } catch {
    return { parts: 0, changeParts: 0, bytes: size };
  }
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
    const { undo, undoParts, changeParts, bytes: _bytes, rollback, ...rest } = parsed.data;
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

function tooOld(message: string): { ok: false; error: ReturnType<typeof clawgateError> } {
  return { ok: false, error: clawgateError("CLAWGATE_VERSION_TOO_OLD", message) };
}
