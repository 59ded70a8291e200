import type { Step, TurnBudget } from "./turn-budget.js";

/** Work for one key: a generator of steps as TurnBudget.run drives it. */
export type Steps = () => Iterator<Step, void>;

/** The one iterator a piece started after close() gets: done before its first step. */
const NOTHING: Iterator<Step, void> = { next: () => ({ done: true, value: undefined }) };

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
  /** Pieces of each key run and not ended yet (the one running included). */
  readonly #counts = new Map<string, number>();
  #closed = false;

  constructor(budget: TurnBudget, onError: (key: string, error: unknown) => void) {
    this.#budget = budget;
    this.#onError = onError;
  }

  /**
   * Runs `steps` after every piece of `key` run before; it is made when its turn comes. Undefined
   * when it ran to its end at once, else a promise that settles (never rejects) once it has
   * ended, however: done, failed (told to onError) or dropped by close().
   */
  run(key: string, steps: Steps): Promise<void> | undefined {
    if (this.#closed) return undefined;
    const tail = this.#tails.get(key);
    let running: Promise<void> | undefined;
    if (tail === undefined) {
      try {
        running = this.#budget.run(this.#guarded(steps));
      } catch (error) {
        this.#reportError(key, error);
        return undefined;
      }
      if (running === undefined) return undefined;
    } else {
      running = tail.then(() => this.#budget.run(this.#guarded(steps)));
    }
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
    const done: Promise<void> = running
      .catch((error: unknown) => this.#reportError(key, error))
      .finally(() => {
        const left = (this.#counts.get(key) ?? 1) - 1;
        if (left === 0) this.#counts.delete(key);
        else this.#counts.set(key, left);
        if (this.#tails.get(key) === done) this.#tails.delete(key);
      });
    this.#tails.set(key, done);
    return done;
  }

  /**
   * `steps` made now, stopped at its next step once the work is closed: its generator is
   * returned (its `finally` blocks run) and the rest of it never does.
   */
  #guarded(steps: Steps): Iterator<Step, void> {
    if (this.#closed) return NOTHING;
    const inner = steps();
    return {
      next: () => {
        if (!this.#closed) return inner.next();
        inner.return?.();
        return { done: true, value: undefined };
      },
    };
  }

  /**
   * Hands a piece's failure to onError. A throw from onError itself is a bug; it becomes a
   * process warning rather than a rejection nothing handles, which would end the process and
   * hold back every later piece of the key.
   */
  #reportError(key: string, error: unknown): void {
    if (this.#closed) return;
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

  /** Pieces of `key` run and not ended yet: one waiting for a later turn, and those behind it. */
  queued(key: string): number {
    return this.#counts.get(key) ?? 0;
  }

  /** Settles once every piece run so far has ended (and any they queued meanwhile). */
  async idle(): Promise<void> {
    while (this.#tails.size > 0) await Promise.all([...this.#tails.values()]);
  }

  /**
   * Runs nothing more: a piece waiting stops at its next step, those behind it never start, and
   * run() does nothing from now on. Settles once every piece has ended; the shared budget may
   * still resume a stopped piece once, at its next turn, which then ends at once.
   */
  close(): Promise<void> {
    this.#closed = true;
    return this.idle();
  }
}
