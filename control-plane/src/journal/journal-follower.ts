import type { Logger } from "pino";
import { Informer, type InformerBatch } from "../store/informer.js";
import type { Store } from "../store/store.js";
import { eventIdTime, eventsPrefix } from "./event-key.js";
import { parseEvent, type RecordListener } from "./journal.js";

export interface JournalFollowerOptions {
  store: Store;
  /** Key prefix with its trailing slash (e.g. "/clawgate/"); events are under `{prefix}events/`. */
  prefix: string;
  logger: Pick<Logger, "debug" | "info" | "warn">;
  /** Wall clock: events recorded before start() are history, not news; default Date.now. */
  clock?: () => number;
}

/**
 * Every heal event as it lands in the store, whichever control-plane replica wrote it: the
 * journal's own onRecord hears only what this process wrote, so a console connected to one
 * replica missed the heals another replica journaled (its data planes' evictions, the leader's
 * remediation) until it reloaded. One watch on the journal's prefix, keys only in memory (the
 * journal is bounded, 1,000 events by default); a re-read after a broken watch hands over the
 * events written meanwhile too.
 */
export class JournalFollower {
  readonly #prefix: string;
  readonly #clock: () => number;
  readonly #informer: Informer;
  readonly #listeners = new Set<RecordListener>();
  /** Events older than this were in the journal before this process followed it. */
  #since = Number.POSITIVE_INFINITY;

  constructor(options: JournalFollowerOptions) {
    this.#prefix = eventsPrefix(options.prefix);
    this.#clock = options.clock ?? Date.now;
    this.#informer = new Informer({
      store: options.store,
      prefixes: [this.#prefix],
      name: "heal journal",
      logger: options.logger,
      keepValues: false,
      onBatch: (batch) => this.#read(batch),
    });
  }

  /** Reads the journal's keys and follows it; rejects if that first read fails. */
  async start(): Promise<void> {
    this.#since = this.#clock();
    await this.#informer.start();
  }

  stop(): Promise<void> {
    return this.#informer.stop();
  }

  /** Calls `listener` with each event any replica records from now on; returns the unsubscribe. */
  onRecord(listener: RecordListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  #read(batch: InformerBatch): void {
    if (this.#listeners.size === 0) return;
    for (const { key, current, previous } of batch.changes) {
      // New keys only: a delete is the journal trimming its oldest events.
      if (current === undefined || previous !== undefined) continue;
      const id = key.slice(this.#prefix.length);
      if (!(eventIdTime(id) >= this.#since)) continue;
      const event = parseEvent(id, current.value);
      if (event === undefined) continue;
      for (const listener of this.#listeners) {
        try {
          listener(event);
        } catch {
          // One listener's failure must not keep the others from the event.
        }
      }
    }
  }
}
