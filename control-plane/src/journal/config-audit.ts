import { randomInt } from "node:crypto";
import type { Logger } from "pino";
import { ANONYMOUS_CALLER_NAME } from "../auth/token-store.js";
import type { AlsoWrites } from "../resources/config-service.js";
import type { Operation, Store } from "../store/store.js";
import { chunkKey, chunkOwner, chunkPuts, readChanges, splitChanges } from "./change-list.js";
import { type ConfigChange, type ConfigEvent, storedConfigEventSchema } from "./config-event.js";
import { eventId, eventIdTime, SEQ_MODULUS } from "./event-key.js";

export interface ConfigAuditOptions {
  store: Store;
  /** Key prefix with its trailing slash; events go under `{prefix}audit/`. */
  prefix: string;
  /** Events kept; each write deletes the oldest beyond this in its own commit. Default 1000. */
  maxEvents?: number;
  /** Wall clock for event times; default Date.now. */
  clock?: () => number;
  logger?: Logger;
}

/** Deletes one write carries at most, leaving room under etcd's 128 operations per commit. */
const TRIM_BATCH = 8;
/** Writes between re-reads of the keys, so events other replicas wrote are trimmed too. */
const RESYNC_EVERY = 100;

export function auditPrefix(prefix: string): string {
  return `${prefix}audit/`;
}

/** Change lists too long for an event's commit, in chunks apart from the events. */
export function auditChangesPrefix(prefix: string): string {
  return `${prefix}audit-changes/`;
}

type Rollback = { from: number; to: number; reason?: string };

/** What one write trims: keys it deletes, and chunks of its trimmed events left for later. */
interface TrimPlan {
  deletes: string[];
  orphaned: string[];
}

/**
 * The audit journal of config writes: who (the token's name), what (the resources changed) and
 * the store revision it produced, read through `GET /v1/events?type=config`. An event is not
 * written on its own: `operations()` gives the writes that go into the very commit that makes
 * the change, so the event exists exactly when the change does, its key's mod revision is the
 * change's revision, and it adds no store revision of its own (the snapshot version data planes
 * are sent stays the write's). Keys are the heal journal's (time, then a sequence), under
 * `{prefix}audit/`, a prefix no snapshot read ranges over.
 */
export class ConfigAudit {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #changes: string;
  /** Change lists longer than this (JSON) go in chunks; see change-list.ts. */
  readonly #inlineBytes: number;
  readonly #chunkBytes: number;
  readonly #maxEvents: number;
  readonly #clock: () => number;
  readonly #logger: Logger | undefined;
  /** Event keys, oldest first, as last read plus those handed out since, with their chunks. */
  #known: { key: string; parts: number }[] = [];
  /** Chunk keys whose event is gone, to delete with the next writes. */
  #orphans: string[] = [];
  #sinceResync = 0;
  /** Starts at random so two replicas writing in the same millisecond pick different keys. */
  #seq = randomInt(SEQ_MODULUS);

  constructor(options: ConfigAuditOptions) {
    this.#store = options.store;
    this.#prefix = auditPrefix(options.prefix);
    this.#changes = auditChangesPrefix(options.prefix);
    this.#inlineBytes = Math.floor(options.store.txnLimits.maxBytes / 8);
    this.#chunkBytes = Math.floor(options.store.txnLimits.maxBytes / 4);
    this.#maxEvents = options.maxEvents ?? 1_000;
    this.#clock = options.clock ?? Date.now;
    this.#logger = options.logger;
    if (!Number.isInteger(this.#maxEvents) || this.#maxEvents < 1) {
      throw new RangeError(`maxEvents must be a positive integer, got ${this.#maxEvents}`);
    }
  }

  /** Reads the keys there are, so the first writes already trim the oldest. */
  async start(): Promise<void> {
    await this.#resync();
  }

  /**
   * The writes that journal a change made by `token`, to commit with the change itself: the
   * event, and deletes of the oldest events beyond `maxEvents`. None when nothing changes.
   * Token and registry writes commit these on their own and do not report back, so the key list
   * is updated at once, as if the commit succeeds; one that fails (a token name taken) leaves it
   * a little off until the next re-read.
   */
  operations(token: string | undefined, changes: readonly ConfigChange[]): Operation[] {
    const writes = this.#operations(token, changes, undefined, false);
    writes.committed?.(0);
    return writes.commit;
  }

  /**
   * As operations(), for a config write: a list of changes too long for the write's commit
   * goes `ahead` in chunks (see AlsoWrites), so an apply of any size the API takes is journaled.
   */
  changeWrites(token: string | undefined, changes: readonly ConfigChange[]): AlsoWrites {
    return this.#operations(token, changes, undefined, true);
  }

  /** As changeWrites(), for a rollback: the event says which version it left and restored. */
  rollbackOperations(
    token: string | undefined,
    changes: readonly ConfigChange[],
    rollback: Rollback,
  ): AlsoWrites {
    return this.#operations(token, changes, rollback, true);
  }

  #operations(
    token: string | undefined,
    changes: readonly ConfigChange[],
    rollback: Rollback | undefined,
    chunked: boolean,
  ): AlsoWrites {
    if (changes.length === 0) return { commit: [], ahead: [] };
    const now = this.#clock();
    const id = eventId(now, this.#seq++);
    const key = `${this.#prefix}${id}`;
    // Token and registry writes change a resource or two: always inline.
    const split = chunked
      ? splitChanges(changes, this.#inlineBytes, this.#chunkBytes)
      : { inline: [...changes], parts: [] };
    const value = JSON.stringify({
      time: new Date(now).toISOString(),
      token: token ?? ANONYMOUS_CALLER_NAME,
      changes: split.inline,
      ...(split.parts.length === 0 ? {} : { changeParts: split.parts.length }),
      ...(rollback === undefined ? {} : { rollback }),
    });
    const trim = this.#planTrim();
    return {
      commit: [
        { type: "put", key, value },
        ...trim.deletes.map((old): Operation => ({ type: "delete", key: old })),
      ],
      ahead: chunkPuts(this.#changes, id, split.parts),
      // Only a commit that happened shifts keys off the list: an attempt that lost a race (the
      // config service retries with fresh writes) or failed deleted nothing, and the keys it
      // meant to trim must still be trimmed by the next write.
      committed: () => this.#settle(trim, { key, parts: split.parts.length }),
    };
  }

  /** The key list once a write's commit happened: its trim done, its event added. */
  #settle(trim: TrimPlan, added: { key: string; parts: number }): void {
    const gone = new Set(trim.deletes);
    this.#known = this.#known.filter((event) => !gone.has(event.key));
    this.#orphans = this.#orphans.filter((chunk) => !gone.has(chunk));
    for (const chunk of trim.orphaned)
      if (!this.#orphans.includes(chunk)) this.#orphans.push(chunk);
    this.#known.push(added);
    if (++this.#sinceResync >= RESYNC_EVERY) {
      this.#resync().catch((error: unknown) =>
        this.#logger?.warn({ err: error }, "config audit keys could not be re-read"),
      );
    }
  }

  /**
   * Keys to delete with this write, at most TRIM_BATCH: chunks left from earlier trims, then
   * the oldest events beyond maxEvents with their chunks (the rest wait for the next writes:
   * with their event gone, nothing reads them). Changes nothing: see #settle.
   */
  #planTrim(): TrimPlan {
    let excess = Math.max(0, this.#known.length + 1 - this.#maxEvents);
    const deletes = this.#orphans.slice(0, TRIM_BATCH);
    const orphaned: string[] = [];
    for (const oldest of this.#known) {
      if (excess <= 0 || deletes.length >= TRIM_BATCH) break;
      excess--;
      deletes.push(oldest.key);
      const id = oldest.key.slice(this.#prefix.length);
      for (let part = 0; part < oldest.parts; part++) {
        const chunk = chunkKey(this.#changes, id, part);
        if (deletes.length < TRIM_BATCH) deletes.push(chunk);
        else orphaned.push(chunk);
      }
    }
    return { deletes, orphaned };
  }

  /** Config events newest first, at most `limit`, recorded at or after `since` (epoch ms). */
  async list(query: { limit?: number; since?: number } = {}): Promise<ConfigEvent[]> {
    const limit = query.limit ?? 100;
    const range = await this.#store.range(this.#prefix);
    const events: ConfigEvent[] = [];
    for (let i = range.items.length - 1; i >= 0 && events.length < limit; i--) {
      const item = range.items[i];
      if (item === undefined) continue;
      const id = item.key.slice(this.#prefix.length);
      if (query.since !== undefined && eventIdTime(id) < query.since) break;
      let json: unknown;
      try {
        json = JSON.parse(item.value);
      } catch {
        continue;
      }
      const parsed = storedConfigEventSchema.safeParse(json);
      if (!parsed.success) continue;
      const { changeParts, ...event } = parsed.data;
      // A long list is in chunks; one that is not all there (trimmed meanwhile) stays [].
      const changes =
        changeParts === undefined
          ? event.changes
          : ((await readChanges(this.#store, this.#changes, id, changeParts)) ?? event.changes);
      // Written in the change's own commit: its mod revision is the revision the change made.
      events.push({ id, type: "config", ...event, changes, revision: item.modRevision });
    }
    return events;
  }

  async #resync(): Promise<void> {
    this.#sinceResync = 0;
    const range = await this.#store.range([this.#prefix, this.#changes]);
    const events = range.items.filter((item) => item.key.startsWith(this.#prefix));
    this.#known = events.map((item) => ({ key: item.key, parts: partsOf(item.value) }));
    const ids = new Set(events.map((item) => item.key.slice(this.#prefix.length)));
    // Chunks of an event that is gone, or of a write that failed after writing them.
    this.#orphans = range.items
      .filter((item) => item.key.startsWith(this.#changes))
      .filter((item) => !ids.has(chunkOwner(this.#changes, item.key)))
      .map((item) => item.key);
  }
}

/** How many change chunks a stored event has (0 for none or an unreadable event). */
function partsOf(value: string): number {
  try {
    const parsed = storedConfigEventSchema.safeParse(JSON.parse(value));
    return parsed.success ? (parsed.data.changeParts ?? 0) : 0;
  } catch {
    return 0;
  }
}
