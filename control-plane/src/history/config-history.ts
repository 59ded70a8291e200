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
import type { Logger } from "pino";
import { ANONYMOUS_CALLER_NAME } from "../auth/token-store.js";
import { chunkByBytes, chunkPuts, splitChanges } from "../journal/change-list.js";
import type { ConfigChange } from "../journal/config-event.js";
import { eventId, SEQ_MODULUS } from "../journal/event-key.js";
import { kindPrefixes, readOutsideApply } from "../resources/apply-gate.js";
import type { AlsoWrites } from "../resources/config-service.js";
import { clawgateError, type Outcome } from "../resources/errors.js";
import type { Operation, RangeResult, Store } from "../store/store.js";
import { deleteChunks } from "./chunk-sweep.js";
import { noUndo, type RebuiltConfig, tooOld, undoEntries } from "./config-rebuild.js";
import {
  chunkSteps,
  type EntryKey,
  entryKeys,
  type ParsedEntry,
  readEntries,
  withChanges,
} from "./entry-reads.js";
import type { HistoryItem, RollbackMark, StoredHistoryEntry, UndoStep } from "./history-entry.js";
import { type HistoryPrefixes, historyPrefixes, sizedEntryName } from "./history-keys.js";
import { knownHistory } from "./known-entries.js";
import { type KnownEntry, knownBytes, planTrim } from "./trim-plan.js";

export type { HistoricResource, RebuiltConfig } from "./config-rebuild.js";
export { historyChangesPrefix, historyPrefix, historyUndoPrefix } from "./history-keys.js";

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

/**
 * Why 256 MiB: etcd refuses every write once its database reaches its quota (2 GiB by default,
 * NOSPACE alarm). Besides the history it holds the config (50,000 resources are about 100 MB),
 * a big apply's undo records (a copy of what it replaces) and the journals, and a deleted value
 * keeps its space until etcd compacts and defragments. A history that may rewrite a 50 MB config
 * five times over still leaves that database well under its quota; a count alone (historyLimit)
 * would let 100 such rewrites take 5 GB.
 */
export const DEFAULT_HISTORY_MAX_BYTES = 256 * 1024 * 1024;
/** Writes between re-reads of the keys, so entries other replicas wrote are trimmed too. */
const RESYNC_EVERY = 100;

export class ConfigHistory {
  readonly #store: Store;
  readonly #prefix: string;
  /** Where entries, their undo chunks and their change chunks live (see history-keys.ts). */
  readonly #keys: HistoryPrefixes;
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
  #sinceResync = 0;
  #seq = randomInt(SEQ_MODULUS);
  /** The version whose entry is never trimmed (a baking rollout's; see keep()). */
  #kept: () => number | undefined = () => undefined;

  constructor(options: ConfigHistoryOptions) {
    this.#store = options.store;
    this.#prefix = options.prefix;
    this.#keys = historyPrefixes(options.prefix);
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
      ...chunkPuts(this.#keys.undo, id, undoValues),
      ...chunkPuts(this.#keys.changes, id, listed.parts),
    ];
    const entry: StoredHistoryEntry = {
      time: new Date(now).toISOString(),
      author: author ?? ANONYMOUS_CALLER_NAME,
      changes: listed.inline,
      ...(listed.parts.length === 0 ? {} : { changeParts: listed.parts.length }),
      ...(rollback === undefined ? {} : { rollback }),
      undo: null,
      undoParts: chunks.length,
    };
    const value = JSON.stringify(entry);
    const { id, bytes } = sizedEntryName(this.#keys.entries, event, value, aheadOf);
    const key = `${this.#keys.entries}${id}`;
    const ahead = aheadOf(id);
    const bounds = { limit: this.#limit, maxBytes: this.#maxBytes, kept: this.#kept() };
    const trimmed = planTrim(this.#known, bytes, bounds, this.#keys);
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
      ...(garbage.length === 0
        ? {}
        : { afterCommit: () => deleteChunks(this.#store, garbage, this.#logger) }),
    };
  }

  /** Bytes the kept entries take, their chunks included, as last read plus written since. */
  get bytes(): number {
    return knownBytes(this.#known);
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
  #undo(
    read: RangeResult,
    entries: readonly ParsedEntry[],
    after: number,
  ): Promise<Outcome<RebuiltConfig>> {
    return undoEntries(read, this.#prefix, entries, after, (entry) =>
      chunkSteps(this.#store, this.#keys.undo, entry),
    );
  }

  /** An entry's item with its whole change list, read from its chunks when it has them. */
  #withChanges(entry: ParsedEntry): Promise<HistoryItem> {
    return withChanges(this.#store, this.#keys.changes, entry);
  }

  /** Every entry's key and version, newest first; values are not read. */
  #entryKeys(): Promise<EntryKey[]> {
    return entryKeys(this.#store, this.#keys.entries);
  }

  /** The entries of `keys`, newest first (see readEntries). */
  #entries(keys: readonly EntryKey[]): Promise<ParsedEntry[]> {
    return readEntries(this.#store, keys);
  }

  /**
   * Entry and chunk keys only: values are not needed to know what to trim, as an entry's name
   * carries its size (see history-keys.ts).
   */
  async #resync(): Promise<void> {
    this.#sinceResync = 0;
    const { entries, undo, changes } = this.#keys;
    const range = await this.#store.range([entries, undo, changes], { keysOnly: true });
    ({ known: this.#known, orphans: this.#orphans } = knownHistory(
      range.items,
      this.#keys,
      this.#maxUndoBytes,
    ));
  }
}
