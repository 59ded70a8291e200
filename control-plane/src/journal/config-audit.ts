import { randomInt } from "node:crypto";
import type { Logger } from "pino";
import type { Operation, Store } from "../store/store.js";
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
  readonly #maxEvents: number;
  readonly #clock: () => number;
  readonly #logger: Logger | undefined;
  /** Event keys, oldest first, as last read plus those handed out since. */
  #known: string[] = [];
  #sinceResync = 0;
  /** Starts at random so two replicas writing in the same millisecond pick different keys. */
  #seq = randomInt(SEQ_MODULUS);

  constructor(options: ConfigAuditOptions) {
    this.#store = options.store;
    this.#prefix = auditPrefix(options.prefix);
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
   * The key list is updated as if the commit succeeds; a commit that does not (a conflict that
   * is retried) leaves it a little off until the next re-read, which costs nothing but a
   * delete of a key that is already gone.
   */
  operations(token: string | undefined, changes: readonly ConfigChange[]): Operation[] {
    return this.#operations(token, changes, undefined);
  }

  /** As operations(), for a rollback: the event says which version it left and restored. */
  rollbackOperations(
    token: string | undefined,
    changes: readonly ConfigChange[],
    rollback: { from: number; to: number; reason?: string },
  ): Operation[] {
    return this.#operations(token, changes, rollback);
  }

  #operations(
    token: string | undefined,
    changes: readonly ConfigChange[],
    rollback: { from: number; to: number; reason?: string } | undefined,
  ): Operation[] {
    if (changes.length === 0) return [];
    const now = this.#clock();
    const key = `${this.#prefix}${eventId(now, this.#seq++)}`;
    const value = JSON.stringify({
      time: new Date(now).toISOString(),
      token: token ?? "anonymous",
      changes,
      ...(rollback === undefined ? {} : { rollback }),
    });
    const excess = Math.min(Math.max(0, this.#known.length + 1 - this.#maxEvents), TRIM_BATCH);
    const trimmed = this.#known.splice(0, excess);
    this.#known.push(key);
    if (++this.#sinceResync >= RESYNC_EVERY) {
      this.#resync().catch((error: unknown) =>
        this.#logger?.warn({ err: error }, "config audit keys could not be re-read"),
      );
    }
    return [
      { type: "put", key, value },
      ...trimmed.map((old): Operation => ({ type: "delete", key: old })),
    ];
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
      // Written in the change's own commit: its mod revision is the revision the change made.
      events.push({ id, type: "config", ...parsed.data, revision: item.modRevision });
    }
    return events;
  }

  async #resync(): Promise<void> {
    this.#sinceResync = 0;
    const range = await this.#store.range(this.#prefix);
    this.#known = range.items.map((item) => item.key);
  }
}
