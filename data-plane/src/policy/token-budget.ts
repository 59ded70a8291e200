import { QuotaKind } from "@clawgate/proto";
import { type UsageScanner, usageScannerFor } from "../quota/usage-scanner.js";
import type {
  Policy,
  PolicyCompileContext,
  PolicyFactory,
  PolicyRequest,
  PolicyServices,
} from "./policy.js";

/**
 * Tenant `tokensPerMinute` and `tokensPerDay`, fleet-wide. A request is admitted while the
 * tenant's leases on both budgets are not spent (what a response costs is known only when it
 * ends); its response's `usage` (OpenAI or Anthropic style, JSON or SSE) is read as the bytes
 * pass, without holding them (usage-scanner.ts), and debited when the response ends, or when
 * it is cut, with what was seen. Spent: 429 CLAWGATE_TOKEN_BUDGET_EXHAUSTED with Retry-After
 * until the window resets. Counts clawgate_tenant_tokens_total for every tenant's response.
 */

/** The scanner of each request whose response is being read, until it is debited. */
const scanners = new WeakMap<PolicyRequest, UsageScanner>();

function debit(request: PolicyRequest, services: PolicyServices): void {
  const scanner = scanners.get(request);
  const tenant = request.tenant;
  if (scanner === undefined || tenant === undefined) return;
  // Once: the response's end and the request's completion both arrive here.
  scanners.delete(request);
  const tokens = scanner.tokens();
  if (tokens <= 0) return;
  services.tenantMetrics?.tokens(tenant.name, tokens);
  const { tokensPerMinute, tokensPerDay } = tenant.source;
  services.quota?.debit(tenant.name, QuotaKind.TOKENS_PER_MINUTE, Number(tokensPerMinute), tokens);
  services.quota?.debit(tenant.name, QuotaKind.TOKENS_PER_DAY, Number(tokensPerDay), tokens);
}

const policy: Policy = Object.freeze({
  name: "token-budget",
  onRequest(request, services) {
    const tenant = request.tenant;
    const quota = services.quota;
    if (tenant === undefined || quota === undefined) return undefined;
    for (const [kind, limit] of [
      [QuotaKind.TOKENS_PER_MINUTE, tenant.source.tokensPerMinute],
      [QuotaKind.TOKENS_PER_DAY, tenant.source.tokensPerDay],
    ] as const) {
      const admission = quota.admit(tenant.name, kind, Number(limit), false);
      if (!admission.ok) {
        return {
          kind: "error",
          code: "CLAWGATE_TOKEN_BUDGET_EXHAUSTED",
          retryAfterMs: admission.retryAfterMs,
        };
      }
    }
    return undefined;
  },
  onResponse(request, _status, headers, services) {
    if (request.tenant === undefined) return undefined;
    const scanner = usageScannerFor(headers["content-type"]);
    if (scanner === undefined) return undefined;
    scanners.set(request, scanner);
    return {
      onData: (chunk) => scanner.push(chunk),
      onEnd: () => debit(request, services),
    };
  },
  onComplete(request, _status, services) {
    // A response cut short never ended: what was seen of its usage is still owed.
    debit(request, services);
  },
} satisfies Policy);

export const tokenBudget: PolicyFactory = Object.freeze({
  name: "token-budget",
  compile: (context: PolicyCompileContext) => (context.tenants.size === 0 ? undefined : policy),
});
