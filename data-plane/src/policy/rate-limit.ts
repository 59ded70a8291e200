import { QuotaKind } from "@clawgate/proto";
import type { Policy, PolicyCompileContext, PolicyFactory } from "./policy.js";

/**
 * Tenant `requestsPerMinute`, held across the whole fleet: each request spends one unit of
 * this data plane's lease on the tenant's budget (LeaseBook), so admitting it never waits for
 * the control plane. Over the limit: 429 CLAWGATE_RATE_LIMITED with Retry-After, the time
 * until the window resets. Also counts clawgate_tenant_requests_total for every request that
 * has a tenant, whatever answered it.
 */
const policy: Policy = Object.freeze({
  name: "rate-limit",
  onRequest(request, services) {
    const tenant = request.tenant;
    const quota = services.quota;
    if (tenant === undefined || quota === undefined) return undefined;
    const limit = tenant.source.requestsPerMinute;
    const admission = quota.admit(tenant.name, QuotaKind.REQUESTS_PER_MINUTE, limit);
    if (admission.ok) return undefined;
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
