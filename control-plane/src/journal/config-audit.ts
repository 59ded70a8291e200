import type { Logger } from "pino";
import type { Operation, Store } from "../store/store.js";
import { type ConfigChange, type ConfigEvent, storedConfigEventSchema } from "./config-event.js";
import { eventId, eventIdTime } from "./event-key.js";

export interface ConfigAuditOptions {
  store: Store;
  /** Key prefix with its trailing slash; events go under `{prefix}audit/`. */
  prefix: string;
  /** Events kept; the oldest are deleted in the commit that adds a new one. Default 1000. */
  maxEvents?: number;
  /** Wall clock for event times; default Date.now. */
  clock?: () => number;
  logger?: Logger;
}

export interface ConfigWrite {
  /** Name of the token that made it; "anonymous" when the API runs without tokens. */
  token: string | undefined;
  revision: number;
  changes: readonly ConfigChange[];
}

/** Deletes one commit may carry when trimming; under etcd's 128 operations per transaction. */
const TRIM_BATCH = 100;
/** Commits between re-reads of the keys, so events other replicas wrote are trimmed too. */
const RESYNC_EVERY = 100;

export function auditPrefix(prefix: string): string {
  return `${prefix}audit/`;
}

/**
 * The audit journal of config writes: who (the token's name), what (the resources changed)
 * and the store revision it produced, beside the heal journal and read through the same
 * `GET /v1/events` (`?type=config`). Keys are the heal journal's (time, then a sequence), under
 * `{prefix}audit/`, a prefix no config reader ranges over. Config writes come at human pace,
 * so each event is its own commit; writes are serialised to keep the key list in step.
 */
export class ConfigAudit {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #maxEvents: number;
  readonly #clock: () => number;
  readonly #logger: Logger | undefined;
  #known: string[] | undefined;
  #sinceResync = 0;
  #seq = 0;
  #chain: Promise<unknown> = Promise.resolve();

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

  /**
   * Journals a write that changed something; a write that changed nothing produced no revision
   * and is not journaled. Never rejects: the write already happened, so a failure to journal it
   * is logged (with the token name and revision) rather than turned into a failed request.
   */
  record(write: ConfigWrite): Promise<ConfigEvent | undefined> {
    if (write.changes.length === 0) return Promise.resolve(undefined);
    const run = this.#chain.then(() => this.#write(write));
    this.#chain = run.catch(() => undefined);
    return run.catch((error: unknown) => {
      this.#logger?.error(
        { err: error, token: write.token, revision: write.revision },
        "config write could not be journaled",
      );
      return undefined;
    });
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
      if (parsed.success) events.push({ id, type: "config", ...parsed.data });
    }
    return events;
  }

  async #write(write: ConfigWrite): Promise<ConfigEvent> {
    const known = await this.#knownKeys();
    for (let attempt = 0; attempt < 5; attempt++) {
      const now = this.#clock();
      const id = eventId(now, this.#seq++);
      const key = `${this.#prefix}${id}`;
      const stored = {
        time: new Date(now).toISOString(),
        token: write.token ?? "anonymous",
        revision: write.revision,
        changes: [...write.changes],
      };
      const excess = Math.min(Math.max(0, known.length + 1 - this.#maxEvents), TRIM_BATCH);
      const commit = await this.#store.commit(
        [{ key, modRevision: 0 }],
        [
          { type: "put", key, value: JSON.stringify(stored) },
          ...known.slice(0, excess).map((old): Operation => ({ type: "delete", key: old })),
        ],
      );
      // Another replica took this key in the same millisecond: try the next sequence number.
      if (!commit.succeeded) continue;
      known.splice(0, excess);
      known.push(key);
      known.sort();
      this.#sinceResync++;
      return { id, type: "config", ...stored };
    }
    throw new Error("config audit key collided 5 times in a row");
  }

  async #knownKeys(): Promise<string[]> {
    if (this.#known !== undefined && this.#sinceResync < RESYNC_EVERY) return this.#known;
    const range = await this.#store.range(this.#prefix);
    this.#known = range.items.map((item) => item.key);
    this.#sinceResync = 0;
    return this.#known;
  }
}
