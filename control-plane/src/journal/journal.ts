import { Counter, type Registry } from "prom-client";
import type { Compare, Operation, Store } from "../store/store.js";
import { eventId, eventIdTime, eventsPrefix } from "./event-key.js";
import {
  type HealEvent,
  type HealEventInput,
  healEventInputSchema,
  storedHealEventSchema,
} from "./heal-event.js";

export interface JournalOptions {
  store: Store;
  /** Key prefix with its trailing slash (e.g. "/clawgate/"); events go under `{prefix}events/`. */
  prefix: string;
  /** Events kept; the oldest are deleted in the commit that adds a new one. Default 1000. */
  maxEvents?: number;
  /** Registry clawgate_heal_actions_total{action,result} is registered on; default none. */
  metrics?: Registry;
  /** Wall clock for event times; default Date.now. */
  clock?: () => number;
  /**
   * Records between full re-reads of the journal's keys, which is how this instance learns
   * of events other control planes wrote (and trims them too); default 100.
   */
  resyncEvery?: number;
}

export interface JournalQuery {
  /** Most events returned, newest first; default 100. */
  limit?: number;
  /** Only events of this upstream. */
  upstream?: string;
  /** Only events recorded at or after this time (epoch milliseconds). */
  since?: number;
}

/** Extra compares and writes that must commit together with the event, or not at all. */
export interface JournalGuard {
  compares: readonly Compare[];
  operations: readonly Operation[];
}

export type RecordListener = (event: HealEvent) => void;

/** Deletes one commit may carry when trimming; etcd caps a transaction at 128 operations. */
const TRIM_BATCH = 100;
/** Tries with the next sequence number when another writer took the same key. */
const MAX_KEY_ATTEMPTS = 5;
const HEAL_ACTIONS_METRIC = "clawgate_heal_actions_total";

/**
 * The heal journal: every action the self-healing chain takes (quarantine, evict, readmit,
 * remediation, registry expiry), stored under `{prefix}events/` where every control plane and
 * `GET /v1/events` can read it. Bounded to `maxEvents`: each write also deletes the oldest
 * events beyond the bound in the same commit, so the journal never outgrows it for long,
 * even with several control planes writing (each re-reads the keys every `resyncEvery`).
 */
export class Journal {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #maxEvents: number;
  readonly #clock: () => number;
  readonly #resyncEvery: number;
  readonly #counter: Counter<"action" | "result"> | undefined;
  readonly #listeners = new Set<RecordListener>();
  /** Event keys as last read plus those written since, oldest first; undefined until read. */
  #known: string[] | undefined;
  #sinceResync = 0;
  #seq = 0;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(options: JournalOptions) {
    this.#store = options.store;
    this.#prefix = eventsPrefix(options.prefix);
    this.#maxEvents = options.maxEvents ?? 1_000;
    this.#clock = options.clock ?? Date.now;
    this.#resyncEvery = options.resyncEvery ?? 100;
    if (!Number.isInteger(this.#maxEvents) || this.#maxEvents < 1) {
      throw new RangeError(`maxEvents must be a positive integer, got ${this.#maxEvents}`);
    }
    if (!Number.isInteger(this.#resyncEvery) || this.#resyncEvery < 1) {
      throw new RangeError(`resyncEvery must be a positive integer, got ${this.#resyncEvery}`);
    }
    if (options.metrics !== undefined) {
      const existing = options.metrics.getSingleMetric(HEAL_ACTIONS_METRIC);
      this.#counter =
        (existing as Counter<"action" | "result"> | undefined) ??
        new Counter({
          name: HEAL_ACTIONS_METRIC,
          help: "Heal actions journaled, by action and result (the event's outcome, or none).",
          labelNames: ["action", "result"] as const,
          registers: [options.metrics],
        });
    }
  }

  /**
   * Records one heal action and resolves with the stored event. Throws a TypeError when the
   * event is invalid (unknown action, bad upstream name) and rejects when the store fails.
   */
  async record(input: HealEventInput): Promise<HealEvent> {
    const event = await this.recordGuarded(input, { compares: [], operations: [] });
    // Without compares of its own, only a store failure keeps an event from being written.
    if (event === undefined) throw new Error("journal event was not written");
    return event;
  }

  /**
   * Records the event in one commit with `guard`'s compares and operations; resolves undefined,
   * writing nothing, when one of those compares fails. Lets a caller record an event exactly
   * once across control planes by claiming a key in the same transaction.
   */
  recordGuarded(input: HealEventInput, guard: JournalGuard): Promise<HealEvent | undefined> {
    const parsed = healEventInputSchema.safeParse(input);
    if (!parsed.success) {
      const reason = parsed.error.issues
        .map((issue) => `${issue.path.join(".") || "event"}: ${issue.message}`)
        .join("; ");
      return Promise.reject(new TypeError(`invalid heal event: ${reason}`));
    }
    // Serialised so the known-key list and the sequence stay in step with what was committed.
    const run = this.#chain.then(() => this.#write(parsed.data, guard));
    this.#chain = run.catch(() => undefined);
    return run;
  }

  /** Events newest first, filtered by upstream and time. */
  async list(query: JournalQuery = {}): Promise<HealEvent[]> {
    const limit = query.limit ?? 100;
    const range = await this.#store.range(this.#prefix);
    const events: HealEvent[] = [];
    for (let i = range.items.length - 1; i >= 0 && events.length < limit; i--) {
      const item = range.items[i];
      if (item === undefined) continue;
      const id = item.key.slice(this.#prefix.length);
      // Keys start with their time, so everything older than `since` is past this point.
      if (query.since !== undefined && eventIdTime(id) < query.since) break;
      const event = parseEvent(id, item.value);
      if (event === undefined) continue;
      if (query.upstream !== undefined && event.upstream !== query.upstream) continue;
      events.push(event);
    }
    return events;
  }

  /** Calls `listener` after each event this instance writes; returns the unsubscribe function. */
  onRecord(listener: RecordListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  async #write(
    input: Omit<HealEvent, "id" | "time">,
    guard: JournalGuard,
  ): Promise<HealEvent | undefined> {
    const known = await this.#knownKeys();
    for (let attempt = 0; attempt < MAX_KEY_ATTEMPTS; attempt++) {
      const now = this.#clock();
      const id = eventId(now, this.#seq++);
      const key = `${this.#prefix}${id}`;
      const stored = { time: new Date(now).toISOString(), ...input };
      const event: HealEvent = { id, ...stored };
      const excess = Math.min(Math.max(0, known.length + 1 - this.#maxEvents), TRIM_BATCH);
      const trimmed = known.slice(0, excess);
      const own = new Set(guard.operations.map((op) => op.key));
      const commit = await this.#store.commit(
        [...guard.compares, { key, modRevision: 0 }],
        [
          ...guard.operations,
          { type: "put", key, value: JSON.stringify(stored) },
          ...trimmed
            .filter((old) => !own.has(old))
            .map((old): Operation => ({ type: "delete", key: old })),
        ],
      );
      if (!commit.succeeded) {
        // Either the caller's guard failed, or another writer took this key: tell them apart.
        if ((await this.#store.get(key)) === undefined) return undefined;
        continue;
      }
      known.splice(0, excess);
      insertSorted(known, key);
      this.#sinceResync++;
      this.#counter?.inc({ action: event.action, result: event.outcome ?? "none" });
      for (const listener of this.#listeners) {
        try {
          listener(event);
        } catch {
          // A listener's failure must not turn a recorded event into a failed record().
        }
      }
      return event;
    }
    throw new Error(`journal key collided ${MAX_KEY_ATTEMPTS} times in a row`);
  }

  /** The event keys, re-read now and then; a backlog beyond one commit's trim is cut first. */
  async #knownKeys(): Promise<string[]> {
    if (this.#known !== undefined && this.#sinceResync < this.#resyncEvery) return this.#known;
    const range = await this.#store.range(this.#prefix);
    const keys = range.items.map((item) => item.key);
    while (keys.length + 1 - this.#maxEvents > TRIM_BATCH) {
      const batch = keys.splice(0, Math.min(TRIM_BATCH, keys.length + 1 - this.#maxEvents));
      await this.#store.commit(
        [],
        batch.map((key): Operation => ({ type: "delete", key })),
      );
    }
    this.#known = keys;
    this.#sinceResync = 0;
    return keys;
  }
}

function parseEvent(id: string, value: string): HealEvent | undefined {
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch {
    return undefined;
  }
  const parsed = storedHealEventSchema.safeParse(json);
  if (!parsed.success) return undefined;
  const event: HealEvent = {
    id,
    time: parsed.data.time,
    upstream: parsed.data.upstream,
    action: parsed.data.action,
    source: parsed.data.source,
  };
  if (parsed.data.node !== undefined) event.node = parsed.data.node;
  if (parsed.data.evidence !== undefined) event.evidence = parsed.data.evidence;
  if (parsed.data.outcome !== undefined) event.outcome = parsed.data.outcome;
  return event;
}

function insertSorted(keys: string[], key: string): void {
  let index = keys.length;
  while (index > 0 && (keys[index - 1] as string) > key) index--;
  keys.splice(index, 0, key);
}
