import type { PolicyAnswer, PolicyChain, PolicyRequest, PolicyServices } from "./policy.js";

/** A chain's verdict: at once when no policy waits, later when one does. */
export type PolicyVerdict = PolicyAnswer | undefined | Promise<PolicyAnswer | undefined>;

/**
 * Runs a chain's onRequest in order; the first answer ends it. Shared by the request pipeline
 * and the WebSocket handshake, so a route's policies hold whichever way a client comes in.
 * A `wait` answer (a share of a fleet budget on its way) resumes the chain at that same policy
 * once it settles: the policies before it already ran and must not run twice (auth took the
 * key off the headers). Synchronous unless a policy waits.
 */
export function runRequestPolicies(
  policies: PolicyChain,
  request: PolicyRequest,
  services: PolicyServices,
  from = 0,
): PolicyVerdict {
  for (let i = from; i < policies.length; i++) {
    const answer = policies[i]!.onRequest(request, services);
    if (answer === undefined) continue;
    if (answer.kind !== "wait") return answer;
    return answer.ready.then(() => runRequestPolicies(policies, request, services, i));
  }
  return undefined;
}
