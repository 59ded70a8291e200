import type { HealthChange } from "./node-health.js";
import { type Schedule, systemSchedule } from "./schedule.js";

export interface HealthReportPacerOptions {
  /**
   * Sends the whole current view. With `held`, that node is reported in `held.from`, the state
   * it left, because the control plane has not heard of that state yet.
   */
  send: (held?: HealthChange) => void;
  /** Least time between two paced sends; default 1000 ms. */
  intervalMs?: number;
  /** Timer source; default real, unref'd timers. */
  schedule?: Schedule;
  /**
   * True while whatever `send` feeds keeps every change itself (a changes-only health stream
   * lists each transition): a node changing again then waits for the interval like any other
   * change, instead of forcing a report. Default: never.
   */
  keepsEveryChange?: () => boolean;
}

/**
 * Coalesces health reports. A report is the data plane's whole view (every node it watches), so
 * sending one per state change costs nodes x changes: a rack of 6,000 nodes evicted in one burst
 * built and queued 6,000 reports of 6,000 nodes each on the stream to the control plane, and the
 * data plane ran out of heap. Here the first request after a quiet interval sends at once (a
 * lone eviction reaches the control plane without delay); requests during the following
 * interval only mark the view dirty, and one report with the latest state goes at its end.
 *
 * The control plane journals every transition it sees between two reports of a node, so no
 * state may be skipped: a node changing again before its last change was reported (quarantined,
 * then evicted by the confirming probe) sends the view at once with that node still in the state
 * it just left. A burst of first changes (a rack going dark) stays one report per interval.
 * Where the reports carry each change themselves (changes-only, `keepsEveryChange`), nothing is
 * skipped by waiting, so a second change waits like the first.
 */
export class HealthReportPacer {
  readonly #send: (held?: HealthChange) => void;
  readonly #intervalMs: number;
  readonly #schedule: Schedule;
  readonly #keepsEveryChange: () => boolean;
  /** Nodes ("upstream address") whose latest change has not been sent yet. */
  readonly #unsent = new Set<string>();
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
    this.#keepsEveryChange = options.keepsEveryChange ?? (() => false);
  }

  /**
   * The view changed: `change` for a node's state change, nothing for nodes added or removed.
   * Reports it now, or once at the end of the current interval.
   */
  request(change?: HealthChange): void {
    if (this.#closed) return;
    if (change !== undefined) {
      // Upstream names hold no space (DESIGN.md resource names): the key is unambiguous.
      const key = `${change.upstream} ${change.address}`;
      if (this.#unsent.has(key) && !this.#keepsEveryChange()) {
        // Its previous state would be skipped: report it now, the new one follows paced.
        this.#sendNow(change);
        this.#unsent.add(key);
        this.#dirty = true;
        return;
      }
      this.#unsent.add(key);
    }
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
    this.#unsent.clear();
  }

  #sendAndWait(): void {
    this.#cancel = this.#schedule(() => {
      this.#cancel = undefined;
      if (this.#dirty && !this.#closed) this.#sendAndWait();
    }, this.#intervalMs);
    this.#sendNow();
  }

  #sendNow(held?: HealthChange): void {
    this.#dirty = false;
    this.#unsent.clear();
    this.#send(held);
  }
}
