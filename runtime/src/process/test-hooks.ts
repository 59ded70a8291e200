export const BLOCK_ON_SIGUSR2_ENV = "CLAWGATE_TEST_BLOCK_ON_SIGUSR2_MS";

/**
 * Test-only: with CLAWGATE_TEST_BLOCK_ON_SIGUSR2_MS=N, SIGUSR2 blocks the event loop for N ms,
 * the way a runaway synchronous loop would, so an end-to-end test can watch the watchdog pings
 * stop. Without the variable nothing is installed and SIGUSR2 keeps its default meaning.
 */
export function installTestHooks(
  env: Readonly<Record<string, string | undefined>>,
  logger: { warn(obj: object, msg: string): void },
): void {
  const blockMs = Number(env[BLOCK_ON_SIGUSR2_ENV]);
  if (!Number.isFinite(blockMs) || blockMs <= 0) return;
  logger.warn({ blockMs }, `${BLOCK_ON_SIGUSR2_ENV} is set: SIGUSR2 blocks the event loop`);
  process.on("SIGUSR2", () => {
    logger.warn({ blockMs }, "SIGUSR2: blocking the event loop (test hook)");
    const until = Date.now() + blockMs;
    while (Date.now() < until) {
      // Busy on purpose: nothing else may run.
    }
  });
}
