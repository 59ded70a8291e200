import type { Logger } from "pino";
import type { KeyValue, Store, Watch, WatchEvent } from "./store.js";

/** One key that changed: `current` is absent when it was deleted, `previous` when it is new. */
export interface InformerChange {
  key: string;
  current: KeyValue | undefined;
  previous: KeyValue | undefined;
  /**
   * Revision of the write that made this change (for a delete, the one that deleted the key);
   * after a relist, the list's revision: when in the gap it happened is not known.
   */
  revision: number;
}

export interface InformerBatch {
  /** Revision the mirror is at once this batch is applied. */
  revision: number;
  changes: InformerChange[];
  /**
   * True after a relist (the watch was compacted or broke): `changes` is then the difference
   * between the mirror before and the fresh list, not a sequence of events.
   */
  replaced: boolean;
  /**
   * True for the batch of a list (the first one, or a relist): `changes` then carry the list's
   * revision, not their own, and a key deleted before the list is not among them at all.
   */
  listed: boolean;
}

export type InformerLogger = Pick<Logger, "debug" | "info" | "warn">;

export interface InformerOptions {
  store: Store;
  /** Key prefixes to mirror; an exact key works too (with any longer key it prefixes). */
  prefixes: readonly string[];
  /** Called after each batch is applied to the mirror; it must not throw. */
  onBatch?: (batch: InformerBatch) => void;
  logger: InformerLogger;
  /** What the mirror holds, in log lines; default "config". */
  name?: string;
  /** First delay before relisting after a watch failure; default 100 ms. */
  retryMinMs?: number;
  /** Cap on that delay as failures repeat; default 5 s. */
  retryMaxMs?: number;
  /**
   * False: the mirror keeps each key's revisions and lease but not its value (`get` and
   * `entries` answer it as ""), for a consumer that keeps its own parsed form of large values
   * and should not hold each one twice. Batches still carry the values. Default true.
   */
  keepValues?: boolean;
}

/**
 * Mirrors a few key prefixes of the store in memory, in the manner of a Kubernetes informer:
 * one paged list, then a watch from the list's revision + 1, so no reader has to range over
 * the prefix again. A watch that fails (history compacted, etcd restarted) may have missed
 * events, so the prefixes are listed again, with backoff while the store is unreachable, and
 * the consumer is handed the difference as a "replaced" batch.
 *
 * One watch on the prefixes' longest common prefix, not one per prefix: etcd orders the
 * events of one watch by revision, so the mirror is always the store as of one revision.
 */
export class Informer {
  readonly #store: Store;
  readonly #prefixes: readonly string[];
  readonly #root: string;
  readonly #onBatch: ((batch: InformerBatch) => void) | undefined;
  readonly #logger: InformerLogger;
  readonly #name: string;
  readonly #retryMinMs: number;
  readonly #retryMaxMs: number;
  readonly #keepValues: boolean;
  #items = new Map<string, KeyValue>();
  #revision = 0;
  #watch: Watch | undefined;
  /** Bumped per watch so a late callback from a replaced watch is recognised and dropped. */
  #generation = 0;
  #relisting = false;
  #stopped = false;
  readonly #stopSignal = new AbortController();
  #started: Promise<void> | undefined;
  readonly #waiters = new Set<{ revision: number; resolve: (reached: boolean) => void }>();

  constructor(options: InformerOptions) {
    if (options.prefixes.length === 0) throw new RangeError("prefixes must not be empty");
    this.#store = options.store;
    this.#prefixes = [...options.prefixes];
    this.#root = commonPrefix(this.#prefixes);
    this.#onBatch = options.onBatch;
    this.#logger = options.logger;
    this.#name = options.name ?? "config";
    this.#retryMinMs = options.retryMinMs ?? 100;
    this.#retryMaxMs = options.retryMaxMs ?? 5_000;
    this.#keepValues = options.keepValues ?? true;
    if (!(this.#retryMinMs > 0 && this.#retryMaxMs >= this.#retryMinMs)) {
      throw new RangeError(
        `retryMaxMs (${this.#retryMaxMs}) must be at least retryMinMs (${this.#retryMinMs}) and both positive`,
      );
    }
  }

  /**
   * Lists, then watches. Rejects when the first list fails; later failures are retried. Calling
   * it again returns the same promise, so several consumers can share one informer.
   */
  start(): Promise<void> {
    if (this.#started === undefined) {
      const started = this.#listAndWatch(true);
      this.#started = started;
      // A first list that failed is tried again by the next caller, not remembered for good.
      started.catch(() => {
        if (this.#started === started) this.#started = undefined;
      });
    }
    return this.#started;
  }

  /** Resolves once the first list is in the mirror. */
  ready(): Promise<void> {
    return this.start();
  }

  /** The store revision the mirror is at (of the last event or list seen). */
  get revision(): number {
    return this.#revision;
  }

  get(key: string): KeyValue | undefined {
    return this.#items.get(key);
  }

  /** Every mirrored key under `prefix`, in no particular order. */
  *entries(prefix: string): IterableIterator<KeyValue> {
    for (const item of this.#items.values()) {
      if (item.key.startsWith(prefix)) yield item;
    }
  }

  /**
   * Resolves true once the mirror reaches `revision`, false after `timeoutMs` or on stop. Only
   * a change under the mirrored prefixes moves the mirror: wait for revisions of such writes.
   */
  waitForRevision(revision: number, timeoutMs: number): Promise<boolean> {
    if (this.#revision >= revision) return Promise.resolve(true);
    if (this.#stopped) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = {
        revision,
        resolve: (reached: boolean) => {
          clearTimeout(timer);
          this.#waiters.delete(waiter);
          resolve(reached);
        },
      };
      const timer = setTimeout(() => waiter.resolve(false), timeoutMs);
      timer.unref?.();
      this.#waiters.add(waiter);
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#stopSignal.abort();
    this.#generation++;
    const watch = this.#watch;
    this.#watch = undefined;
    for (const waiter of [...this.#waiters]) waiter.resolve(false);
    await watch?.close().catch(() => undefined);
  }

  async #listAndWatch(first: boolean): Promise<void> {
    const list = await this.#store.range(this.#prefixes);
    if (this.#stopped) return;
    const fresh = new Map<string, KeyValue>();
    for (const item of list.items) {
      // The store reads each prefix; a key under two overlapping prefixes is kept once.
      if (this.#wanted(item.key)) fresh.set(item.key, item);
    }
    const changes = first
      ? [...fresh.values()].map((current) => added(current, list.revision))
      : diff(this.#items, fresh, list.revision);
    this.#items = this.#keepValues ? fresh : withoutValues(fresh);
    this.#revision = Math.max(this.#revision, list.revision);
    // Delivered before the watch opens, so no event can reach the consumer ahead of the list.
    this.#deliver({ revision: this.#revision, changes, replaced: !first, listed: true });
    await this.#openWatch(list.revision + 1);
  }

  async #openWatch(fromRevision: number): Promise<void> {
    const generation = ++this.#generation;
    const watch = await this.#store.watch(this.#root, fromRevision, {
      onEvents: (events) => {
        if (generation === this.#generation) this.#onEvents(events);
      },
      onError: (error) => {
        if (generation === this.#generation) void this.#relist(error);
      },
    });
    if (generation !== this.#generation) {
      // stop() or a failure replaced this watch while it was being opened.
      await watch.close().catch(() => undefined);
      return;
    }
    this.#watch = watch;
  }

  #onEvents(events: readonly WatchEvent[]): void {
    const changes: InformerChange[] = [];
    for (const event of events) {
      this.#revision = Math.max(this.#revision, event.modRevision);
      if (!this.#wanted(event.key)) continue;
      const previous = this.#items.get(event.key);
      if (event.type === "delete") {
        if (previous === undefined) continue;
        this.#items.delete(event.key);
        changes.push({ key: event.key, current: undefined, previous, revision: event.modRevision });
        continue;
      }
      // A watch event carries no create revision or lease: a new key was created by this very
      // event, and an updated one keeps its lease (renewals and re-registrations reuse it).
      const current: KeyValue = {
        key: event.key,
        value: event.value ?? "",
        modRevision: event.modRevision,
        createRevision: previous?.createRevision ?? event.modRevision,
      };
      if (previous?.lease !== undefined) current.lease = previous.lease;
      this.#items.set(event.key, this.#keepValues ? current : { ...current, value: "" });
      changes.push({ key: event.key, current, previous, revision: event.modRevision });
    }
    // Events outside the prefixes still move the revision: waiters may be waiting on it.
    this.#deliver({ revision: this.#revision, changes, replaced: false, listed: false });
  }

  #deliver(batch: InformerBatch): void {
    if (batch.changes.length > 0 || batch.replaced) {
      try {
        this.#onBatch?.(batch);
      } catch (error) {
        this.#logger.warn({ err: error }, `${this.#name} mirror consumer failed`);
      }
    }
    for (const waiter of [...this.#waiters]) {
      if (this.#revision >= waiter.revision) waiter.resolve(true);
    }
  }

  /** The watch may have missed events: list again and re-watch, backing off while that fails. */
  async #relist(error: unknown): Promise<void> {
    if (this.#relisting || this.#stopped) return;
    this.#relisting = true;
    this.#logger.warn(
      { err: error },
      `${this.#name} watch failed; re-reading the store and re-watching`,
    );
    this.#generation++;
    const old = this.#watch;
    this.#watch = undefined;
    await old?.close().catch(() => undefined);
    let delay = this.#retryMinMs;
    try {
      while (!this.#stopped) {
        // Jitter keeps several control planes from retrying a recovering etcd in step.
        await this.#sleep(delay * (0.5 + Math.random() / 2));
        if (this.#stopped) return;
        try {
          await this.#listAndWatch(false);
          this.#logger.info({ revision: this.#revision }, `${this.#name} watch re-established`);
          return;
        } catch (retryError) {
          delay = Math.min(delay * 2, this.#retryMaxMs);
          this.#logger.warn({ err: retryError, retryInMs: delay }, "store still unavailable");
        }
      }
    } finally {
      this.#relisting = false;
    }
  }

  #wanted(key: string): boolean {
    return this.#prefixes.some((prefix) => key.startsWith(prefix));
  }

  #sleep(ms: number): Promise<void> {
    const signal = this.#stopSignal.signal;
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener("abort", done);
    });
  }
}

function added(current: KeyValue, revision: number): InformerChange {
  return { key: current.key, current, previous: undefined, revision };
}

/** The mirror's copy of a list without the values, which the batch alone hands over. */
function withoutValues(items: ReadonlyMap<string, KeyValue>): Map<string, KeyValue> {
  const bare = new Map<string, KeyValue>();
  for (const [key, item] of items) bare.set(key, { ...item, value: "" });
  return bare;
}

/** What turns `before` into `after`: keys added, changed (by mod revision) and removed. */
function diff(
  before: ReadonlyMap<string, KeyValue>,
  after: ReadonlyMap<string, KeyValue>,
  revision: number,
): InformerChange[] {
  const changes: InformerChange[] = [];
  for (const [key, current] of after) {
    const previous = before.get(key);
    if (previous?.modRevision !== current.modRevision) {
      changes.push({ key, current, previous, revision });
    }
  }
  for (const [key, previous] of before) {
    if (!after.has(key)) changes.push({ key, current: undefined, previous, revision });
  }
  return changes;
}

function commonPrefix(prefixes: readonly string[]): string {
  let common = prefixes[0] ?? "";
  for (const prefix of prefixes) {
    let i = 0;
    while (i < common.length && i < prefix.length && common[i] === prefix[i]) i++;
    common = common.slice(0, i);
  }
  return common;
}
