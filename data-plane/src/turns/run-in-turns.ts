import { setImmediate as nextTurn } from "node:timers/promises";

/** Default longest stretch of work before clients get the event loop back. */
export const DEFAULT_TURN_MS = 10;

export interface RunInTurnsOptions {
  /** Work for about this long, then let the event loop run; default 10 ms. */
  turnMs?: number;
  /** Checked at every turn: true stops the work (it is no longer wanted); default never. */
  superseded?: () => boolean;
  /** Clock in ms; default performance.now. */
  now?: () => number;
  /**
   * Let the event loop run before the first step, so none of the work lands in the caller's
   * turn (one that has other work to finish, such as a snapshot's swap); default false.
   */
  laterTurn?: boolean;
}

/**
 * Runs `steps` to its end across event-loop turns, each turn about `turnMs` long, and resolves
 * to what it returns; undefined when `superseded` said so (the rest of the steps never run).
 * Work on a whole 20,000-node config that cannot be made small (compiling a snapshot, encoding
 * it for the disk cache) is written as a generator of small steps and run here, so no single
 * turn blocks the proxy's clients for long.
 */
export async function runInTurns<T>(
  steps: Iterator<unknown, T>,
  options: RunInTurnsOptions = {},
): Promise<T | undefined> {
  const turnMs = options.turnMs ?? DEFAULT_TURN_MS;
  const now = options.now ?? (() => performance.now());
  const superseded = options.superseded ?? (() => false);
  if (options.laterTurn === true) {
    await nextTurn();
    if (superseded()) return undefined;
  }
  let turnStart = now();
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    if (now() - turnStart < turnMs) continue;
    await nextTurn();
    if (superseded()) return undefined;
    turnStart = now();
  }
}
