import type { Scheduler } from "./scheduler.js";

interface Pending {
  at: number;
  seq: number;
  fn: () => void;
}

/** A scheduler whose time moves only when told to, for tests of backoff and retries. */
export class ManualScheduler implements Scheduler {
  #now: number;
  #seq = 0;
  readonly #pending = new Set<Pending>();

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  after(ms: number, fn: () => void): () => void {
    const entry: Pending = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn };
    this.#pending.add(entry);
    return () => {
      this.#pending.delete(entry);
    };
  }

  /** Timers waiting to fire. */
  pending(): number {
    return this.#pending.size;
  }

  /** When the next timer fires; undefined when none waits. */
  nextAt(): number | undefined {
    let next: number | undefined;
    for (const entry of this.#pending) if (next === undefined || entry.at < next) next = entry.at;
    return next;
  }

  /** Moves time forward by `ms`, firing every timer that falls due, in order. */
  advance(ms: number): void {
    const until = this.#now + ms;
    while (true) {
      const due = [...this.#pending]
        .filter((entry) => entry.at <= until)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (due === undefined) break;
      this.#pending.delete(due);
      this.#now = due.at;
      due.fn();
    }
    this.#now = until;
  }
}
