import { Counter, type Registry } from "prom-client";
import type { Compare, Operation, Store } from "../store/store.js";
import { eventId, eventIdTime, eventsPrefix } from "./event-key.js";
import {
  type HealEvent,
  type HealEventInput,
  healEventInputSchema,
  storedHealEventSchema,
} from "./heal-event.js";
import { type BacklogEntry, type EventBody, JournalBacklog } from "./journal-backlog.js";

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
   * Commits between full re-reads of the journal's keys, which is how this instance learns
   * of events other control planes wrote (and trims them too); default 100.
   */
  resyncEvery?: number;
  /**
   * Events record() queues before a burst is only counted, in one summary event per source and
   * action (clawgate_heal_events_summarized_total counts them); default 1000.
   */
  maxQueued?: number;
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
/** Operations in one commit: etcd's default --max-txn-ops. */
const MAX_TXN_OPS = 128;
/** Events one commit writes, leaving room under MAX_TXN_OPS for trimming deletes. */
const MAX_BATCH_EVENTS = 100;
/** Bytes of keys and values one commit writes: under etcd's 1.5 MiB request limit, with room. */
const MAX_BATCH_BYTES = 1_000_000;
/** Tries with the next sequence number when another writer took the same key. */
const MAX_KEY_ATTEMPTS = 5;
const HEAL_ACTIONS_METRIC = "clawgate_heal_actions_total";
const SUMMARIZED_METRIC = "clawgate_heal_events_summarized_total";

/**
 * The heal journal: every action the self-healing chain takes (quarantine, evict, readmit,
 * remediation, registry expiry), stored under `{prefix}events/` where every control plane and
 * `GET /v1/events` can read it. Bounded to `maxEvents`: each write also deletes the oldest
 * events beyond the bound in the same commit, so the journal never outgrows it for long,
 * even with several control planes writing (each re-reads the keys every `resyncEvery`).
 * record() queues and writes events in batches, one commit per up to 100, one batch at a time,
 * so a burst of N node changes costs about N/100 store commits rather than N (a burst of one
 * per commit is what tripped the etcd client's breaker for config writes too).
 */
export class Journal {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #maxEvents: number;
  readonly #clock: () => number;
  readonly #resyncEvery: number;
  readonly #counter: Counter<"action" | "result"> | undefined;
  readonly #summarized: Counter<"action"> | undefined;
  readonly #backlog: JournalBacklog;
  /** A batch is queued on #chain and has not started: the next record() joins it. */
  #drainQueued = false;
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
    const maxQueued = options.maxQueued ?? 1_000;
    if (!Number.isInteger(maxQueued) || maxQueued < 1) {
      throw new RangeError(`maxQueued must be a positive integer, got ${maxQueued}`);
    }
    this.#backlog = new JournalBacklog(maxQueued);
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
      this.#summarized =
        (options.metrics.getSingleMetric(SUMMARIZED_METRIC) as Counter<"action"> | undefined) ??
        new Counter({
          name: SUMMARIZED_METRIC,
          help: "Heal events beyond the journal's queue, journaled only as a count in a summary event.",
          labelNames: ["action"] as const,
          registers: [options.metrics],
        });
    }
  }

  /**
   * Records one heal action and resolves with the stored event: its own, or the summary it was
   * counted in when it arrived beyond the queue. Rejects with a TypeError when the event is
   * invalid (unknown action, bad upstream name) and with the store's error when its batch fails.
   */
  record(input: HealEventInput): Promise<HealEvent> {
    const parsed = parseInput(input);
    if (parsed instanceof TypeError) return Promise.reject(parsed);
    const { promise, summarized } = this.#backlog.add(parsed);
    if (summarized) this.#summarized?.inc({ action: parsed.action });
    this.#scheduleDrain();
    return promise;
  }

  /**
   * Records the event in one commit with `guard`'s compares and operations; resolves undefined,
   * writing nothing, when one of those compares fails. Lets a caller record an event exactly
   * once across control planes by claiming a key in the same transaction.
   */
  recordGuarded(input: HealEventInput, guard: JournalGuard): Promise<HealEvent | undefined> {
    const parsed = parseInput(input);
    if (parsed instanceof TypeError) return Promise.reject(parsed);
    // Serialised so the known-key list and the sequence stay in step with what was committed.
    const run = this.#chain.then(() => this.#write(parsed, guard));
    this.#chain = run.catch(() => undefined);
    return run;
  }

  /** Queues one batch on the chain, unless one is queued and has not started yet. */
  #scheduleDrain(): void {
    if (this.#drainQueued) return;
    this.#drainQueued = true;
    const run = this.#chain.then(() => {
      this.#drainQueued = false;
      return this.#writeBatch();
    });
    this.#chain = run.catch(() => undefined);
  }

  /** Writes the next batch of queued events in one commit, then queues the next batch if any. */
  async #writeBatch(): Promise<void> {
    let batch: BacklogEntry[] = [];
    try {
      const known = await this.#knownKeys();
      // Room for the deletes that keep the journal at maxEvents once this batch is in.
      const over = known.length - this.#maxEvents;
      const maxPuts = Math.max(1, Math.min(MAX_BATCH_EVENTS, Math.floor((MAX_TXN_OPS - over) / 2)));
      let bytes = 0;
      batch = this.#backlog.take(maxPuts, (body) => {
        // Key and time add well under 100 bytes to the value's JSON.
        const size = Buffer.byteLength(JSON.stringify(body)) + 100 + this.#prefix.length;
        if (bytes + size > MAX_BATCH_BYTES) return false;
        bytes += size;
        return true;
      });
      if (batch.length === 0) return;
      const events = await this.#commitBatch(known, batch);
      for (const [index, entry] of batch.entries()) {
        const event = events[index] as HealEvent;
        this.#counter?.inc(
          { action: event.action, result: event.outcome ?? "none" },
          event.count ?? 1,
        );
        this.#notify(event);
        for (const waiter of entry.waiters) waiter.resolve(event);
      }
    } catch (error) {
      // The store failed before the batch was taken: fail a batch anyway, so a store that is
      // down costs one call per batch of the bounded backlog, not a retry loop.
      if (batch.length === 0) batch = this.#backlog.take(MAX_BATCH_EVENTS, () => true);
      for (const entry of batch) for (const waiter of entry.waiters) waiter.reject(error);
    } finally {
      if (this.#backlog.size > 0) this.#scheduleDrain();
    }
  }

  /** Puts `batch` in one commit with the trimming deletes it needs; returns its events. */
  async #commitBatch(known: string[], batch: BacklogEntry[]): Promise<HealEvent[]> {
    for (let attempt = 0; attempt < MAX_KEY_ATTEMPTS; attempt++) {
      const now = this.#clock();
      const time = new Date(now).toISOString();
      const events = batch.map((entry): HealEvent => {
        const id = eventId(now, this.#seq++);
        return { id, time, ...entry.body };
      });
      const keys = events.map((event) => `${this.#prefix}${event.id}`);
      const excess = Math.min(
        Math.max(0, known.length + batch.length - this.#maxEvents),
        MAX_TXN_OPS - batch.length,
      );
      const commit = await this.#store.commit(
        keys.map((key) => ({ key, modRevision: 0 })),
        [
          ...events.map(
            ({ id, ...stored }, index): Operation => ({
              type: "put",
              key: keys[index] as string,
              value: JSON.stringify(stored),
            }),
          ),
          ...known.slice(0, excess).map((old): Operation => ({ type: "delete", key: old })),
        ],
      );
      // Another writer took one of the keys: try again with the next sequence numbers.
      if (!commit.succeeded) continue;
      known.splice(0, excess);
      for (const key of keys) insertSorted(known, key);
      this.#sinceResync++;
      return events;
    }
    throw new Error(`journal key collided ${MAX_KEY_ATTEMPTS} times in a row`);
  }

  #notify(event: HealEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure must not turn a recorded event into a failed record().
      }
    }
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
      this.#notify(event);
      return event;
    }
    throw new Error(`journal key collided ${MAX_KEY_ATTEMPTS} times in a row`);
  }

  /**
   * The event keys, re-read now and then; a backlog beyond one commit's trim is cut first.
   * Keys only: trimming needs to know which events exist, not what they say, and reading the
   * values made every resync cost the whole journal (maxEvents documents) on the wire.
   */
  async #knownKeys(): Promise<string[]> {
    if (this.#known !== undefined && this.#sinceResync < this.#resyncEvery) return this.#known;
    const range = await this.#store.range(this.#prefix, { keysOnly: true });
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

/** A stored event read back; undefined when it is not a heal event this version knows. */
export function parseEvent(id: string, value: string): HealEvent | undefined {
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
  if (parsed.data.count !== undefined) event.count = parsed.data.count;
  if (parsed.data.sample !== undefined) event.sample = parsed.data.sample;
  return event;
}

function parseInput(input: HealEventInput): EventBody | TypeError {
  const parsed = healEventInputSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const reason = parsed.error.issues
    .map((issue) => `${issue.path.join(".") || "event"}: ${issue.message}`)
    .join("; ");
  return new TypeError(`invalid heal event: ${reason}`);
}

function insertSorted(keys: string[], key: string): void {
  let index = keys.length;
  while (index > 0 && (keys[index - 1] as string) > key) index--;
  keys.splice(index, 0, key);
}
