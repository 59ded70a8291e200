import type { PolicyAnswer, PolicyChain, PolicyRequest, PolicyServices } from "./policy.js";

/**
 * Runs a chain's onRequest in order; the first answer ends it. Shared by the request pipeline
 * and the WebSocket handshake, so a route's policies hold whichever way a client comes in.
 */
export function runRequestPolicies(
  policies: PolicyChain,
  request: PolicyRequest,
  services: PolicyServices,
): PolicyAnswer | undefined {
  for (const policy of policies) {
    const answer = policy.onRequest(request, services);
    if (answer !== undefined) return answer;
  }
  return undefined;
}
