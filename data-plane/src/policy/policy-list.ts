import { auth } from "./auth.js";
import { bodyLimit } from "./body-limit.js";
import { contentEncoding } from "./content-encoding.js";
import { cors } from "./cors.js";
import { headerTransform } from "./header-transform.js";
import { ipFilter } from "./ip-filter.js";
import type { PolicyFactory } from "./policy.js";
import { rateLimit } from "./rate-limit.js";
import { tokenBudget } from "./token-budget.js";

/**
 * Every policy, in the order a request meets them (README "Route policies"). Cheap refusals
 * by network come first; a CORS preflight carries no credentials, so it is answered before
 * auth; who the caller is comes next, so everything after may act on the tenant; cheap
 * refusals come before anything that counts or spends. A new policy is one file and one
 * entry here.
 *
 * 1. ip-filter         ipDeny, then ipAllow, against the peer address (403)
 * 2. cors              a preflight is answered here (204); headers added to responses
 * 3. auth              x-api-key or Authorization: Bearer -> tenant (401, 403)
 * 4. body-limit        maxBodyBytes against Content-Length (413)
 * 5. content-encoding  usage.injectStreamUsage: an encoded body the gateway cannot read (415)
 * 6. rate-limit        requestsPerMinute, fleet-wide, by tenant (429)
 * 7. token-budget      tokensPerMinute and tokensPerDay, fleet-wide, by tenant (429)
 * 8. header-transform  requestHeaders / responseHeaders set and remove
 */
export const POLICY_LIST: readonly PolicyFactory[] = Object.freeze([
  ipFilter,
  cors,
  auth,
  bodyLimit,
  contentEncoding,
  rateLimit,
  tokenBudget,
  headerTransform,
]);
