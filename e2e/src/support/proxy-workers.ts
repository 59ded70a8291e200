import type { DataPlane } from "./data-plane-process.js";
import { metricValue } from "./metrics-text.js";
import { waitFor } from "./wait-for.js";

/** Pids the primary of a data plane with workers logged as "proxy worker started", oldest first. */
export function workerPids(dp: DataPlane): number[] {
  return dp.process.output
    .grep('"proxy worker started"')
    .map((line) => (JSON.parse(line) as { pid: number }).pid);
}

/** The JSON log lines of `dp` whose msg is `msg`, parsed, oldest first. */
export function loggedAs<T = Record<string, unknown>>(dp: DataPlane, msg: string): T[] {
  return dp.process.output
    .grep(`"msg":${JSON.stringify(msg)}`)
    .map((line) => JSON.parse(line) as T);
}

/** Whether a process with this pid exists (signal 0 checks without sending anything). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * SIGKILL for a worker a test stopped (SIGSTOP) and may leave behind on failure: a stopped
 * child would never take the primary's SIGTERM, and nothing else would end it.
 */
export function killIfRunning(pid: number): void {
  if (isRunning(pid)) process.kill(pid, "SIGKILL");
}

/** Waits until `dp`'s /metrics counts `count` workers alive and listening (clawgate_workers). */
export async function waitForWorkers(
  dp: DataPlane,
  count: number,
  what = `${dp.nodeId}'s ${count} workers listening`,
): Promise<void> {
  await waitFor(async () => metricValue(await dp.metrics(), "clawgate_workers") === count, {
    what,
    // A worker forks, loads and applies the config: slow on a loaded 2-core machine.
    timeoutMs: 60_000,
  });
}
