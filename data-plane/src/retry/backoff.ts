/** First backoff ceiling: 25 ms. */
export const BACKOFF_BASE_MS = 25;
/** Largest backoff: 250 ms; a retry goes to another node, so a long wait buys little. */
export const BACKOFF_CAP_MS = 250;

/**
 * Full-jitter exponential backoff: uniform in [0, min(cap, base * 2^(attempt - 1))), so retries
 * from many requests spread out instead of arriving together.
 *
 * @param attempt 1-based number of the attempt that just failed.
 * @param random uniform in [0, 1); default Math.random.
 */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const exponent = Math.max(0, Math.min(attempt - 1, 30));
  const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** exponent);
  return Math.floor(random() * ceiling);
}
