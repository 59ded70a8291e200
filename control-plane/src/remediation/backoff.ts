export interface BackoffPolicy {
  /** Wait after the first attempt. */
  initialMs: number;
  /** Cap on the grown wait. */
  maxMs: number;
  /** Growth per attempt; default 2. */
  factor?: number;
}

/** The wait after attempt number `attempt` (1-based): initial, x2 each time, capped. */
export function backoffDelay(attempt: number, policy: BackoffPolicy): number {
  const factor = policy.factor ?? 2;
  const grown = policy.initialMs * factor ** Math.max(0, attempt - 1);
  return Math.min(grown, policy.maxMs);
}
