import type { Participants } from "./two-phase-apply.js";

export interface WorkerLivenessOptions {
  /** The workers to watch: those that hear messages (one still loading its code cannot answer). */
  readonly participants: Participants;
  /** Time between pings (workerPingIntervalMs). */
  readonly intervalMs: number;
  /** Pings in a row a worker may leave unanswered before it is hung (workerMaxMissedPings). */
  readonly maxMissed: number;
  /** Called once when a worker is found hung; the pool kills and replaces it. */
  readonly hung: (workerId: number, reason: string) => void;
}

/**
 * The systemd watchdog sees only the primary, so a worker whose event loop is stuck (a
 * runaway loop, a pathological regex) would keep its share of connections and never answer
 * them. The primary pings every worker on a timer and the worker answers from its event loop,
 * ahead of any snapshot work it has queued; one that leaves `maxMissed` pings in a row
 * unanswered is reported hung. A worker compiling a big snapshot still answers: compiles
 * yield between turns, and only a stall longer than intervalMs times maxMissed counts.
 */
export class WorkerLiveness {
  readonly #options: WorkerLivenessOptions;
  /** Pings sent since each worker's last answer. */
  readonly #unanswered = new Map<number, number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: WorkerLivenessOptions) {
    this.#options = options;
  }

  start(): void {
    this.#timer ??= setInterval(() => this.#tick(), this.#options.intervalMs);
    // Never what keeps a stopping primary alive.
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** The worker answered a ping: its event loop turns. */
  pong(workerId: number): void {
    if (this.#unanswered.has(workerId)) this.#unanswered.set(workerId, 0);
  }

  /** The worker is gone (died or killed): nothing more is expected of it. */
  gone(workerId: number): void {
    this.#unanswered.delete(workerId);
  }

  #tick(): void {
    const { participants, maxMissed, intervalMs } = this.#options;
    const watched = new Set(participants.ids());
    for (const id of this.#unanswered.keys()) if (!watched.has(id)) this.#unanswered.delete(id);
    for (const id of watched) {
      const unanswered = this.#unanswered.get(id) ?? 0;
      if (unanswered >= maxMissed) {
        this.#unanswered.delete(id);
        this.#options.hung(id, `missed ${unanswered} pings in a row, ${intervalMs} ms apart`);
        continue;
      }
      this.#unanswered.set(id, unanswered + 1);
      participants.send(id, { type: "clawgate:ping" });
    }
  }
}
