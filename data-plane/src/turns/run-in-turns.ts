import { setImmediate as nextTurn } from "node:timers/promises";

/** Default longest stretch of work before clients get the event loop back. */
export const DEFAULT_TURN_MS = 10;

export interface RunInTurnsOptions {
  /** Work for about this long, then let the event loop run; default 10 ms. */
  turnMs?: number;
  /** Checked at every turn: true stops the work (it is no longer wanted); default never. */
  superseded?: () => boolean;
  /** Clock in ms; default performance.now. Runs on the same clock share each turn's time. */
  now?: () => number;
  /**
   * Let the event loop run before the first step, so none of the work lands in the caller's
   * turn (one that has other work to finish, such as a snapshot's swap); default false.
   */
  laterTurn?: boolean;
}

/** The clock of every runInTurns not given one: one function, so that they share turns. */
const systemNow = (): number => performance.now();

/** Per clock, when the work of the current event-loop turn began, while that turn is open. */
const turns = new WeakMap<() => number, { start: number; open: boolean }>();

/**
 * When this event-loop turn's work began, for every runInTurns on the same clock. Several run
 * at once at boot (the snapshot's compile or decode, the request layer's records, the health
 * targets, the cache write): each took its own 10 ms in the same turn, so the turn was the sum.
 * The first slice of a turn opens it and queues an immediate that closes it; that immediate
 * was queued before any slice's next turn, so it runs first in the next check phase.
 */
function turnStartOf(now: () => number): number {
  let turn = turns.get(now);
  if (turn === undefined) {
    turn = { start: 0, open: false };
    turns.set(now, turn);
  }
  if (!turn.open) {
    const opened = turn;
    opened.open = true;
    opened.start = now();
    setImmediate(() => {
      opened.open = false;
    });
  }
  return turn.start;
}

/**
 * Runs `steps` to its end across event-loop turns, each turn about `turnMs` long, and resolves
 * to what it returns; undefined when `superseded` said so (the rest of the steps never run).
 * Work on a whole 20,000-node config that cannot be made small (compiling a snapshot, encoding
 * it for the disk cache) is written as a generator of small steps and run here, so no single
 * turn blocks the proxy's clients for long. Runs on one clock share a turn's `turnMs`: once it
 * is spent, each does one step and waits for the next turn.
 */
export async function runInTurns<T>(
  steps: Iterator<unknown, T>,
  options: RunInTurnsOptions = {},
): Promise<T | undefined> {
  const turnMs = options.turnMs ?? DEFAULT_TURN_MS;
  const now = options.now ?? systemNow;
  const superseded = options.superseded ?? (() => false);
  if (options.laterTurn === true) {
    await nextTurn();
    if (superseded()) return undefined;
  }
  let turnStart = turnStartOf(now);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    if (now() - turnStart < turnMs) continue;
    await nextTurn();
    if (superseded()) return undefined;
    turnStart = turnStartOf(now);
  }
}
