import type { TurnBudget } from "./turn-budget.js";

/** Work for one key: a generator of steps as TurnBudget.run drives it. */
export type Steps = () => Iterator<number, void>;

/**
 * Work run one piece after another per key (a data plane, a stream), each piece in budgeted
 * slices: a piece whose key has nothing pending starts at once, and when it fits in the turn it
 * also ends there, so small reports are taken in as synchronously as before; a piece that has to
 * wait holds back every later piece of its key, so a changes-only report is never applied before
 * the whole report it follows. Pieces of different keys interleave.
 */
export class OrderedWork {
  readonly #budget: TurnBudget;
  readonly #onError: (key: string, error: unknown) => void;
  /** The last piece of each key that is still running. */
  readonly #tails = new Map<string, Promise<void>>();

  constructor(budget: TurnBudget, onError: (key: string, error: unknown) => void) {
    this.#budget = budget;
    this.#onError = onError;
  }

  /** Runs `steps` after every piece of `key` run before; it is made when its turn comes. */
  run(key: string, steps: Steps): void {
    const tail = this.#tails.get(key);
    let running: Promise<void> | undefined;
    if (tail === undefined) {
      try {
        running = this.#budget.run(steps());
      } catch (error) {
        this.#reportError(key, error);
        return;
      }
      if (running === undefined) return;
    } else {
      running = tail.then(() => this.#budget.run(steps()));
    }
    const done: Promise<void> = running
      .catch((error: unknown) => this.#reportError(key, error))
      .finally(() => {
        if (this.#tails.get(key) === done) this.#tails.delete(key);
      });
    this.#tails.set(key, done);
  }

  /**
   * Hands a piece's failure to onError. A throw from onError itself is a bug; it becomes a
   * process warning rather than a rejection nothing handles, which would end the process and
   * hold back every later piece of the key.
   */
  #reportError(key: string, error: unknown): void {
    try {
      this.#onError(key, error);
    } catch (bug) {
      process.emitWarning(bug instanceof Error ? bug : new Error(String(bug)), {
        code: "CLAWGATE_ORDERED_WORK_ERROR_HANDLER",
      });
    }
  }

  /** True while a piece of `key` waits for a later turn. */
  pending(key: string): boolean {
    return this.#tails.has(key);
  }

  /** Settles once every piece run so far has ended (and any they queued meanwhile). */
  async idle(): Promise<void> {
    while (this.#tails.size > 0) await Promise.all([...this.#tails.values()]);
  }
}
