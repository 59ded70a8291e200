import type { Logger } from "pino";

/** One thing to bring in line with a snapshot that is already being served. */
export type AfterSwapStep = readonly [name: string, run: () => void];

/**
 * Runs the steps that follow a swap. The data plane serves the new version from the moment of
 * the swap, so a failure here must not become a NACK (the CP would then believe the previous
 * version is served): each step runs on its own, and one that throws is logged with its name
 * and the version, and the rest still run.
 */
export function runAfterSwap(
  steps: readonly AfterSwapStep[],
  version: number,
  logger: Pick<Logger, "error">,
): void {
  for (const [step, run] of steps) {
    try {
      run();
    } catch (err) {
      logger.error({ err, step, version }, "snapshot applied, but a step after the swap failed");
    }
  }
}
