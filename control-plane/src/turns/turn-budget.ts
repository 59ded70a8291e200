/**
 * Entries of health-report intake (a node decoded and bounds-checked, diffed, tallied, written
 * out for the store) that run in one event-loop turn, across every report being taken in. Each
 * costs a few microseconds, so a turn of intake stays a few milliseconds long; in between, a
 * config change's watch event, rebuild and fan-out get the event loop (issue 9: ten data
 * planes' first 20,000-node reports after a fleet booted held config changes back for 0.4-1.7 s).
 */
export const INTAKE_ENTRIES_PER_TURN = 500;

/**
 * Entries one step of intake work asks for at a time: several intakes share a turn. At 1,000
 * entries a turn (slices of 250), the first change after ten data planes booted still took 98
 * to 143 ms in bench:scale in four runs of five; at 500, 83 and 94 ms, with no more CPU a report.
 */
export const INTAKE_SLICE_ENTRIES = 125;

/**
 * What a step of work yields: the entries it is about to handle, or something it must wait for
 * first (another piece of work taking in what it handed over), which costs no budget.
 */
export type Step = number | PromiseLike<unknown>;

interface Waiting {
  entries: number;
  resume: () => void;
}

/**
 * A budget of work entries per event-loop turn shared by every piece of work that takes from
 * it, served oldest first. Work is written as a generator that yields how many entries it is
 * about to handle (run() drives it): it runs at once, in the caller's turn, as long as the turn
 * has budget left, so small work stays synchronous; big work spreads over as many turns as it
 * needs, a slice per turn per budget, never all in one check phase. A count rather than a clock
 * keeps the slicing the same on a busy machine and in tests.
 */
export class TurnBudget {
  readonly entriesPerTurn: number;
  #used = 0;
  #turnQueued = false;
  readonly #waiting: Waiting[] = [];

  constructor(entriesPerTurn: number) {
    if (!(Number.isInteger(entriesPerTurn) && entriesPerTurn >= 1)) {
      throw new RangeError(`entriesPerTurn must be an integer >= 1, got ${entriesPerTurn}`);
    }
    this.entriesPerTurn = entriesPerTurn;
  }

  /**
   * Runs `steps` to its end, each yielded count taken from the budget before the work after the
   * yield runs, each yielded promise waited for (settled either way) without taking any.
   * Undefined when it ran to its end in this turn, else a promise that settles when it has
   * (rejects with what the steps threw).
   */
  run(steps: Iterator<Step, void>): Promise<void> | undefined {
    for (;;) {
      const step = steps.next();
      if (step.done === true) return undefined;
      if (typeof step.value !== "number") {
        const resume = () => this.run(steps);
        return Promise.resolve(step.value).then(resume, resume);
      }
      const wait = this.#take(step.value);
      if (wait !== undefined) return wait.then(() => this.run(steps));
    }
  }

  /** Counts `entries` in this turn, or queues them for a later turn that has room. */
  #take(entries: number): Promise<void> | undefined {
    this.#queueTurn();
    if (
      this.#waiting.length === 0 &&
      (this.#used === 0 || this.#used + entries <= this.entriesPerTurn)
    ) {
      this.#used += entries;
      return undefined;
    }
    return new Promise((resume) => this.#waiting.push({ entries, resume }));
  }

  /** Ends this turn's count at the next check phase (setImmediate), once per turn. */
  #queueTurn(): void {
    if (this.#turnQueued) return;
    this.#turnQueued = true;
    setImmediate(() => this.#nextTurn());
  }

  /**
   * A new turn: resumes the work waiting, oldest first, as far as the budget goes. Each resumed
   * step runs in this check phase's microtasks, and asks again for its next step (which waits).
   */
  #nextTurn(): void {
    this.#turnQueued = false;
    this.#used = 0;
    while (this.#waiting.length > 0) {
      const next = this.#waiting[0] as Waiting;
      if (this.#used > 0 && this.#used + next.entries > this.entriesPerTurn) break;
      this.#waiting.shift();
      this.#used += next.entries;
      next.resume();
    }
    if (this.#used > 0) this.#queueTurn();
  }
}

/** The control plane's one budget for health-report intake: the stream, FleetHealth, the store write. */
export const intakeTurns = new TurnBudget(INTAKE_ENTRIES_PER_TURN);

/**
 * Entries of the slice of work that starts at `index` of `total`, to yield before it: what
 * the slice really holds, so a small report asks for what it costs, not for a whole slice.
 */
export function sliceAt(index: number, total: number): number {
  return Math.min(INTAKE_SLICE_ENTRIES, total - index);
}
