import type { PolicyFactory } from "./policy.js";
import { rateLimit } from "./rate-limit.js";
import { tokenBudget } from "./token-budget.js";

/**
 * Every policy, in the order a request meets them (README "Route policies"). Who the caller
 * is comes first, so everything after may act on the tenant; cheap refusals come before
 * anything that counts or spends. A new policy is one file and one entry here.
 *
 * 1. cors         a preflight is answered here; headers added to every response
 * 2. ip-filter    ipDeny, then ipAllow, against the peer address
 * 3. auth         x-api-key or Authorization: Bearer -> tenant (401, 403)
 * 4. rate-limit   requestsPerMinute, fleet-wide, by tenant (429)
 *    token-budget tokensPerMinute and tokensPerDay, fleet-wide, by tenant (429)
 * 5. body-limit   maxBodyBytes (413)
 * 6. headers      requestHeaders / responseHeaders set and remove
 */
export const POLICY_LIST: readonly PolicyFactory[] = Object.freeze([rateLimit, tokenBudget]);
