import { readFileSync } from "node:fs";

/** What the Linux scheduler counted for one thread so far (/proc/<pid>/task/<tid>/schedstat). */
export interface ThreadSched {
  /** Time on a CPU, ms. */
  runMs: number;
  /** Time runnable but waiting for a CPU (runqueue), ms. */
  waitMs: number;
  /** Times it was given a CPU. */
  slices: number;
}

/**
 * The main thread's (the event loop's) scheduler counts, or undefined where the kernel keeps
 * none (no schedstat, or the process ended). Told apart, a window's event-loop block is the
 * process's own work (run) or other processes holding the two cores (wait).
 */
export function mainThreadSched(pid: number): ThreadSched | undefined {
  try {
    const [run, wait, slices] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8")
      .trim()
      .split(" ")
      .map(Number);
    if (run === undefined || wait === undefined || slices === undefined) return undefined;
    return { runMs: run / 1e6, waitMs: wait / 1e6, slices };
  } catch {
    return undefined;
  }
}

/** `to` less `from`: what the thread got and waited over a window; undefined when either is. */
export function schedBetween(
  from: ThreadSched | undefined,
  to: ThreadSched | undefined,
): ThreadSched | undefined {
  if (from === undefined || to === undefined) return undefined;
  return {
    runMs: to.runMs - from.runMs,
    waitMs: to.waitMs - from.waitMs,
    slices: to.slices - from.slices,
  };
}
