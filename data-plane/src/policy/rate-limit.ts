import { QuotaKind } from "@clawgate/proto";
import type { Policy, PolicyCompileContext, PolicyFactory, PolicyRequest } from "./policy.js";

/**
 * Tenant `requestsPerMinute`, held across the whole fleet: each request spends one unit of
 * this data plane's lease on the tenant's budget (LeaseBook), so admitting it never waits for
 * the control plane (only the first requests of a window may wait briefly for their share, see
 * LeaseBook). Over the limit: 429 CLAWGATE_RATE_LIMITED with Retry-After, the time
 * until the window resets. Also counts clawgate_tenant_requests_total for every request that
 * has a tenant, whatever answered it.
 */
/**
 * How long one request may keep waiting for shares in all (a burst bigger than one share waits
 * for the next one too); past it, a miss is a refusal. Each single wait is also capped by the
 * LeaseBook (waitForGrantMs), so a request waits at most about twice this.
 */
const WAIT_LIMIT_MS = 500;

/** When each waiting request first waited (services.clock). */
const waitingSince = new WeakMap<PolicyRequest, number>();

const policy: Policy = Object.freeze({
  name: "rate-limit",
  onRequest(request, services) {
    const tenant = request.tenant;
    const quota = services.quota;
    if (tenant === undefined || quota === undefined) return undefined;
    const limit = tenant.source.requestsPerMinute;
    const admission = quota.admit(tenant.name, QuotaKind.REQUESTS_PER_MINUTE, limit);
    if (admission.ok) return undefined;
    // Under the limit but the share asked for is still on its way (just after a start or a
    // window reset): wait for it instead of refusing a tenant that has budget left.
    if (admission.ready !== undefined) {
      const now = services.clock.now();
      const since = waitingSince.get(request) ?? now;
      if (now - since < WAIT_LIMIT_MS) {
        waitingSince.set(request, since);
        return { kind: "wait", ready: admission.ready };
      }
    }
    return { kind: "error", code: "CLAWGATE_RATE_LIMITED", retryAfterMs: admission.retryAfterMs };
  },
  onComplete(request, status, services) {
    if (request.tenant !== undefined) services.tenantMetrics?.request(request.tenant.name, status);
  },
} satisfies Policy);

export const rateLimit: PolicyFactory = Object.freeze({
  name: "rate-limit",
  // Without tenants in the snapshot no request can have one: nothing to hold or count.
  compile: (context: PolicyCompileContext) => (context.tenants.size === 0 ? undefined : policy),
});
