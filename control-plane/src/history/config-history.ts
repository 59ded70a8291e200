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
import type { ConfigChange } from "../journal/config-event.js";
import { eventId, SEQ_MODULUS } from "../journal/event-key.js";
import { kindPrefixes, readOutsideApply } from "../resources/apply-gate.js";
import { clawgateError, type Outcome } from "../resources/errors.js";
import type { KeyValue, Operation, Store } from "../store/store.js";
import {
  type HistoryItem,
  type RollbackMark,
  type StoredHistoryEntry,
  storedHistoryEntrySchema,
  summarize,
  type UndoStep,
} from "./history-entry.js";

export interface ConfigHistoryOptions {
  store: Store;
  /** Key prefix with its trailing slash; entries go under `{prefix}history/`. */
  prefix: string;
  /** Versions kept; each write deletes the oldest beyond this in its own commit. Default 100. */
  limit?: number;
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

/** Deletes one write carries at most, leaving room under etcd's 128 operations per commit. */
const TRIM_BATCH = 8;
/** Writes between re-reads of the keys, so entries other replicas wrote are trimmed too. */
const RESYNC_EVERY = 100;

export function historyPrefix(prefix: string): string {
  return `${prefix}history/`;
}

export class ConfigHistory {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #keys: string;
  readonly #limit: number;
  readonly #clock: () => number;
  readonly #logger: Logger | undefined;
  /** Undo steps bigger than this are not kept (the entry still is): a quarter of a commit. */
  readonly #maxUndoBytes: number;
  #known: string[] = [];
  #sinceResync = 0;
  #seq = randomInt(SEQ_MODULUS);

  constructor(options: ConfigHistoryOptions) {
    this.#store = options.store;
    this.#prefix = options.prefix;
    this.#keys = historyPrefix(options.prefix);
    this.#limit = options.limit ?? 100;
    this.#clock = options.clock ?? Date.now;
    this.#logger = options.logger;
    this.#maxUndoBytes = Math.floor(options.store.txnLimits.maxBytes / 4);
    if (!Number.isInteger(this.#limit) || this.#limit < 1) {
      throw new RangeError(`historyLimit must be a positive integer, got ${this.#limit}`);
    }
  }

  /** Reads the keys there are, so the first writes already trim the oldest. */
  async start(): Promise<void> {
    await this.#resync();
  }

  /**
   * The writes that record a config write made by `author`, to commit with the write itself:
   * the entry, and deletes of the oldest entries beyond the limit. None when nothing changes.
   */
  operations(
    author: string | undefined,
    changes: readonly ConfigChange[],
    writes: readonly KeyWrite[],
    rollback?: RollbackMark,
  ): Operation[] {
    if (changes.length === 0 || writes.length === 0) return [];
    const now = this.#clock();
    const key = `${this.#keys}${eventId(now, this.#seq++)}`;
    let undo: UndoStep[] | null = writes.map((write) => ({
      key: write.key.slice(this.#prefix.length),
      before: write.before ?? null,
    }));
    if (Buffer.byteLength(JSON.stringify(undo)) > this.#maxUndoBytes) {
      // Too big to carry in the commit: the version is listed, but nothing before it rebuilds.
      undo = null;
    }
    const entry: StoredHistoryEntry = {
      time: new Date(now).toISOString(),
      author: author ?? "anonymous",
      changes: [...changes],
      ...(rollback === undefined ? {} : { rollback }),
      undo,
    };
    const excess = Math.min(Math.max(0, this.#known.length + 1 - this.#limit), TRIM_BATCH);
    const trimmed = this.#known.splice(0, excess);
    this.#known.push(key);
    if (++this.#sinceResync >= RESYNC_EVERY) {
      this.#resync().catch((error: unknown) =>
        this.#logger?.warn({ err: error }, "config history keys could not be re-read"),
      );
    }
    return [
      { type: "put", key, value: JSON.stringify(entry) },
      ...trimmed.map((old): Operation => ({ type: "delete", key: old })),
    ];
  }

  /** Versions kept, newest first, at most `limit`. */
  async list(limit = this.#limit): Promise<HistoryItem[]> {
    const range = await this.#store.range(this.#keys);
    return entriesOf(range.items)
      .slice(0, limit)
      .map(({ item }) => item);
  }

  /**
   * The config as it was at `version`, rebuilt from the current config by undoing every later
   * entry. VERSION_NOT_FOUND when no kept entry has that version, VERSION_TOO_OLD when it is
   * older than what is kept (or than an entry too big to undo).
   */
  async at(
    version: number,
  ): Promise<Outcome<{ item: HistoryItem; current: number; resources: HistoricResource[] }>> {
    // During a big apply, the config as it was before it, like every other read.
    const read = await readOutsideApply(this.#store, this.#prefix, [
      ...kindPrefixes(this.#prefix),
      this.#keys,
    ]);
    const entries = entriesOf(read.items.filter((kv) => kv.key.startsWith(this.#keys)));
    const oldest = entries.at(-1)?.item.version;
    const target = entries.find(({ item }) => item.version === version);
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
      if (!kv.key.startsWith(this.#keys)) config.set(kv.key.slice(this.#prefix.length), kv.value);
    }
    for (const { item, undo } of entries) {
      if (item.version <= version) break;
      if (undo === null) {
        return tooOld(
          `version ${item.version} changed too much at once to be undone, so versions before it cannot be rebuilt`,
        );
      }
      for (const step of undo) {
        if (step.before === null) config.delete(step.key);
        else config.set(step.key, step.before);
      }
    }
    return { ok: true, item: target.item, current: read.revision, resources: resourcesOf(config) };
  }

  async #resync(): Promise<void> {
    this.#sinceResync = 0;
    const range = await this.#store.range(this.#keys);
    this.#known = [...range.items]
      .sort((a, b) => a.modRevision - b.modRevision)
      .map((item) => item.key);
  }
}

interface ParsedEntry {
  item: HistoryItem;
  undo: UndoStep[] | null;
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
    const { undo, rollback, ...rest } = parsed.data;
    const item: HistoryItem = {
      version: kv.modRevision,
      ...rest,
      summary: summarize(rest.changes),
      ...(rollback === undefined ? {} : { rollback }),
    };
    entries.push({ item, undo });
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
