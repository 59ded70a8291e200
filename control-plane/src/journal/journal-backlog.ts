import type { HealAction, HealEvent } from "./heal-event.js";

/** An event as recorded, before the journal gives it an id and a time. */
export type EventBody = Omit<HealEvent, "id" | "time">;

interface Waiter {
  resolve(event: HealEvent): void;
  reject(error: unknown): void;
}

/** One event to write, and the record() calls waiting for it. */
export interface BacklogEntry {
  body: EventBody;
  waiters: Waiter[];
}

/** Nodes named in a summary event; enough to see what a burst hit without storing all of it. */
export const SUMMARY_SAMPLE_SIZE = 10;

/**
 * Events waiting to be journaled: a queue of at most `maxQueued`, and beyond it one summary per
 * (source, action) that only counts. A fleet that loses an upstream reports every node of it
 * from every data plane at once (10 data planes x 20,000 nodes is 200,000 changes); the journal
 * keeps only its newest `maxEvents` anyway, so writing them all one by one would flood the
 * store for nothing. The summaries keep the size of such a burst visible.
 */
export class JournalBacklog {
  readonly #maxQueued: number;
  readonly #queue: BacklogEntry[] = [];
  readonly #summaries = new Map<string, BacklogEntry>();

  constructor(maxQueued: number) {
    this.#maxQueued = maxQueued;
  }

  get size(): number {
    return this.#queue.length + this.#summaries.size;
  }

  /**
   * Queues `body`, or, when the queue is full, counts it into the summary of its source and
   * action; says which. The promise resolves with the event written for it (the summary, if so).
   */
  add(body: EventBody): { promise: Promise<HealEvent>; summarized: boolean } {
    let waiter: Waiter | undefined;
    const promise = new Promise<HealEvent>((resolve, reject) => {
      waiter = { resolve, reject };
    });
    const waiting = waiter as Waiter;
    if (this.#queue.length < this.#maxQueued) {
      this.#queue.push({ body, waiters: [waiting] });
      return { promise, summarized: false };
    }
    const key = `${body.source}\u0000${body.action}`;
    const summary = this.#summaries.get(key) ?? this.#newSummary(key, body.source, body.action);
    summary.body.count = (summary.body.count ?? 0) + 1;
    const sample = summary.body.sample ?? [];
    if (sample.length < SUMMARY_SAMPLE_SIZE) {
      sample.push(body.node === undefined ? body.upstream : `${body.upstream}/${body.node}`);
    }
    summary.body.sample = sample;
    // The summary stands under the upstream of its first event: an event always names one.
    if (summary.body.upstream === "") summary.body.upstream = body.upstream;
    summary.body.evidence = `${summary.body.count} ${body.action} events from ${body.source} beyond the journal's queue of ${this.#maxQueued}, counted here instead of written one by one`;
    summary.waiters.push(waiting);
    return { promise, summarized: true };
  }

  /**
   * Takes up to `max` entries, summaries first (there are few, and they would otherwise wait
   * behind a queue a flood keeps full), then the queue oldest first, while `fits` accepts them
   * (the first is taken even if it does not fit: an event alone is always small enough).
   */
  take(max: number, fits: (body: EventBody) => boolean): BacklogEntry[] {
    const batch: BacklogEntry[] = [];
    for (const [key, summary] of this.#summaries) {
      if (batch.length >= max || (!fits(summary.body) && batch.length > 0)) return batch;
      this.#summaries.delete(key);
      batch.push(summary);
    }
    while (batch.length < max) {
      const next = this.#queue[0];
      if (next === undefined || (!fits(next.body) && batch.length > 0)) break;
      this.#queue.shift();
      batch.push(next);
    }
    return batch;
  }

  #newSummary(key: string, source: string, action: HealAction): BacklogEntry {
    const summary: BacklogEntry = { body: { upstream: "", action, source }, waiters: [] };
    this.#summaries.set(key, summary);
    return summary;
  }
}
