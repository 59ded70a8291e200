/** Requests answered and, of them, 5xx. */
export interface Counts {
  requests: number;
  failures: number;
}

export type Verdict = { failing: false } | { failing: true; reason: string };

/**
 * The comparison rule: the canaries fail when, over at least `minRequests` of their requests,
 * their 5xx ratio exceeds the rest of the fleet's (on the version before, over the same time)
 * by more than `maxErrorRatio`. Judging against the rest, not against zero, keeps an outage
 * the whole fleet sees (an upstream down) from being blamed on the new config.
 */
export function judge(
  canary: Counts,
  rest: Counts,
  spec: { maxErrorRatio: number; minRequests: number },
): Verdict {
  if (canary.requests < spec.minRequests) return { failing: false };
  const canaryRatio = canary.failures / canary.requests;
  const restRatio = rest.requests > 0 ? rest.failures / rest.requests : 0;
  if (canaryRatio - restRatio <= spec.maxErrorRatio) return { failing: false };
  return {
    failing: true,
    reason: `canary 5xx ratio ${canaryRatio.toFixed(2)} (${canary.failures} of ${canary.requests}) exceeds the rest of the fleet's ${restRatio.toFixed(2)} (${rest.failures} of ${rest.requests}) by more than maxErrorRatio ${spec.maxErrorRatio}`,
  };
}
