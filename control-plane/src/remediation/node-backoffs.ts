import type { Scheduler } from "./scheduler.js";

/** Backoff entries kept before a sweep drops those already past (see sweep()). */
const BACKOFF_SWEEP_MIN = 1_024;

/**
 * Each node's backoff, kept across episodes so a flapping node is not restarted in a loop;
 * pruned so it stays bounded by the nodes in trouble, not by churn.
 */
export class NodeBackoffs {
  readonly #scheduler: Scheduler;
  readonly #notBefore = new Map<string, number>();
  #sweepAt = BACKOFF_SWEEP_MIN;

  constructor(scheduler: Scheduler) {
    this.#scheduler = scheduler;
  }

  get size(): number {
    return this.#notBefore.size;
  }

  /** Epoch milliseconds before which the node gets no attempt, if any. */
  get(key: string): number | undefined {
    return this.#notBefore.get(key);
  }

  set(key: string, notBefore: number): void {
    this.#notBefore.set(key, notBefore);
  }

  delete(key: string): void {
    this.#notBefore.delete(key);
  }

  /**
   * Drops backoffs already past of nodes with no episode, once their number has doubled since
   * the last sweep.
   */
  sweep(hasEpisode: (key: string) => boolean): void {
    if (this.#notBefore.size < this.#sweepAt) return;
    const now = this.#scheduler.now();
    for (const [key, notBefore] of this.#notBefore) {
      if (notBefore <= now && !hasEpisode(key)) this.#notBefore.delete(key);
    }
    this.#sweepAt = Math.max(BACKOFF_SWEEP_MIN, this.#notBefore.size * 2);
  }
}
