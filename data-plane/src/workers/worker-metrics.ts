import { AggregatorRegistry } from "prom-client";
import type { Participants } from "./two-phase-apply.js";

/**
 * A worker busy past this is left out of one scrape rather than stalling it: Prometheus'
 * default scrape timeout is 10 s, and the other workers' series are still worth having.
 */
const DEFAULT_REPLY_TIMEOUT_MS = 2_000;

interface Scrape {
  readonly waiting: Set<number>;
  readonly replies: object[];
  readonly done: () => void;
}

/**
 * Sums the workers' registries for the primary's /metrics. Only workers that hear messages
 * are asked (one still loading its code would never answer), one that dies mid-scrape is
 * counted out at once, and a hung one only up to a bounded wait: a scrape always answers
 * with the live workers' series instead of timing out.
 */
export class WorkerMetrics {
  readonly #participants: Participants;
  readonly #replyTimeoutMs: number;
  readonly #scrapes = new Map<number, Scrape>();
  #nextId = 1;

  constructor(participants: Participants, options: { replyTimeoutMs?: number } = {}) {
    this.#participants = participants;
    this.#replyTimeoutMs = options.replyTimeoutMs ?? DEFAULT_REPLY_TIMEOUT_MS;
  }

  /** The Prometheus text of every answering worker's series, summed across workers. */
  async text(): Promise<string> {
    const workers = this.#participants.ids();
    const id = this.#nextId++;
    const replies = await new Promise<object[]>((resolve) => {
      const scrape: Scrape = {
        waiting: new Set(workers),
        replies: [],
        done: () => {
          clearTimeout(timer);
          this.#scrapes.delete(id);
          resolve(scrape.replies);
        },
      };
      const timer = setTimeout(scrape.done, this.#replyTimeoutMs);
      this.#scrapes.set(id, scrape);
      if (workers.length === 0) return scrape.done();
      for (const worker of workers)
        this.#participants.send(worker, { type: "clawgate:metrics", id });
    });
    if (replies.length === 0) return "";
    return AggregatorRegistry.aggregate(replies).metrics();
  }

  /** A worker's registry, as getMetricsAsJSON gives it. */
  replied(workerId: number, id: number, metrics: unknown[]): void {
    const scrape = this.#scrapes.get(id);
    if (scrape === undefined || !scrape.waiting.delete(workerId)) return;
    scrape.replies.push(metrics);
    if (scrape.waiting.size === 0) scrape.done();
  }

  /** A worker died: no scrape waits for it. */
  gone(workerId: number): void {
    for (const scrape of this.#scrapes.values()) {
      if (scrape.waiting.delete(workerId) && scrape.waiting.size === 0) scrape.done();
    }
  }
}
