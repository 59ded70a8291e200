/** Thrown from a waitFor condition to give up at once instead of retrying (a process died). */
export class StopWaiting extends Error {
  override name = "StopWaiting";
}

export interface WaitForOptions {
  /** What is being waited for, in words; the timeout error starts with it. */
  what: string;
  /** Give up after this long; default 10 s. */
  timeoutMs?: number;
  /** Pause between polls; default 25 ms. */
  intervalMs?: number;
}

/**
 * Polls `condition` until it returns a value other than undefined, null or false, and
 * resolves with that value. A throwing condition counts as "not yet" (its last error is
 * kept for the timeout message), except for StopWaiting, which ends the wait.
 */
export async function waitFor<T>(
  condition: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: WaitForOptions,
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 25;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  let lastValue: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value !== undefined && value !== null && value !== false) return value;
      lastValue = value;
      lastError = undefined;
    } catch (error) {
      if (error instanceof StopWaiting) {
        throw new Error(`gave up waiting for ${options.what}: ${error.message}`);
      }
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const detail =
        lastError !== undefined
          ? `last error: ${describe(lastError)}`
          : `last value: ${String(lastValue)}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${options.what} (${detail})`, {
        cause: lastError,
      });
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? ` (cause: ${error.cause.message})` : "";
    return `${error.message}${cause}`;
  }
  return String(error);
}
