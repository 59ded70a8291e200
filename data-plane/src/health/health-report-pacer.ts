import { type Schedule, systemSchedule } from "./schedule.js";

export interface HealthReportPacerOptions {
  /** Sends the whole current view; called at most once per `intervalMs`. */
  send: () => void;
  /** Least time between two sends; default 1000 ms. */
  intervalMs?: number;
  /** Timer source; default real, unref'd timers. */
  schedule?: Schedule;
}

/**
 * Coalesces health reports. A report is the data plane's whole view (every node it watches), so
 * sending one per state change costs nodes x changes: a rack of 6,000 nodes evicted in one burst
 * built and queued 6,000 reports of 6,000 nodes each on the stream to the control plane, and the
 * data plane ran out of heap. Here the first request after a quiet interval sends at once (a
 * lone eviction reaches the control plane without delay); requests during the following
 * interval only mark the view dirty, and one report with the latest state goes at its end.
 */
export class HealthReportPacer {
  readonly #send: () => void;
  readonly #intervalMs: number;
  readonly #schedule: Schedule;
  #cancel: (() => void) | undefined;
  #dirty = false;
  #closed = false;

  constructor(options: HealthReportPacerOptions) {
    this.#send = options.send;
    this.#intervalMs = options.intervalMs ?? 1_000;
    if (!(this.#intervalMs >= 0)) {
      throw new RangeError(`health report intervalMs must be >= 0, got ${options.intervalMs}`);
    }
    this.#schedule = options.schedule ?? systemSchedule;
  }

  /** The view changed: report it now, or once at the end of the current interval. */
  request(): void {
    if (this.#closed) return;
    if (this.#cancel !== undefined) {
      this.#dirty = true;
      return;
    }
    this.#sendAndWait();
  }

  /** Drops a pending report; later requests are ignored. */
  close(): void {
    this.#closed = true;
    this.#cancel?.();
    this.#cancel = undefined;
  }

  #sendAndWait(): void {
    this.#dirty = false;
    this.#cancel = this.#schedule(() => {
      this.#cancel = undefined;
      if (this.#dirty && !this.#closed) this.#sendAndWait();
    }, this.#intervalMs);
    this.#send();
  }
}
