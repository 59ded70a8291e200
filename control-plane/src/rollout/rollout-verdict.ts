/** Requests answered and, of them, 5xx. */
export interface Counts {
  requests: number;
  failures: number;
}

/** A canary that refused (NACKed) the version rolled out, with the data plane's reason. */
export interface Refusal {
  nodeId: string;
  version: number;
  error: string;
}

/** What the canaries and the rest did since the rollout began. */
export interface Evidence {
  canary: Counts;
  rest: Counts;
  /** Canaries that NACKed the version rolled out (or a later snapshot of it). */
  refusals: readonly Refusal[];
}

/**
 * failing: roll back. passing: may be promoted once the bake time is over. inconclusive: too
 * few canary requests to tell; never promoted on its own (see judge()).
 */
export type Verdict =
  | { kind: "failing"; reason: string }
  | { kind: "passing" }
  | { kind: "inconclusive"; reason: string };

/**
 * The comparison rule: a canary that NACKs the version fails the rollout (it serves nothing on
 * it, so its clean record would prove nothing). Otherwise the canaries fail when, over at least
 * `minRequests` of their requests, their 5xx ratio exceeds the rest of the fleet's (on the
 * version before, over the same time) by more than `maxErrorRatio`. Judging against the rest,
 * not against zero, keeps an outage the whole fleet sees (an upstream down) from being blamed
 * on the new config. Fewer than `minRequests` canary requests is no evidence either way: the
 * rollout is inconclusive, not passing, so the bake time running out never promotes it.
 */
export function judge(
  evidence: Evidence,
  spec: { maxErrorRatio: number; minRequests: number },
): Verdict {
  const { canary, rest, refusals } = evidence;
  if (refusals.length > 0) {
    const named = refusals.map((r) => `${r.nodeId} refused version ${r.version}: ${r.error}`);
    return { kind: "failing", reason: `canary NACK: ${named.join("; ")}` };
  }
  if (canary.requests < spec.minRequests) {
    return {
      kind: "inconclusive",
      reason: `canaries answered ${canary.requests} of the minRequests ${spec.minRequests} requests on the version`,
    };
  }
  const canaryRatio = canary.failures / canary.requests;
  const restRatio = rest.requests > 0 ? rest.failures / rest.requests : 0;
  if (canaryRatio - restRatio <= spec.maxErrorRatio) return { kind: "passing" };
  return {
    kind: "failing",
    reason: `canary 5xx ratio ${canaryRatio.toFixed(2)} (${canary.failures} of ${canary.requests}) exceeds the rest of the fleet's ${restRatio.toFixed(2)} (${rest.failures} of ${rest.requests}) by more than maxErrorRatio ${spec.maxErrorRatio}`,
  };
}
