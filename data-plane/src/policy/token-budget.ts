import { QuotaKind } from "@clawgate/proto";
import { type UsageReader, usageReaderFor } from "../quota/encoded-usage-reader.js";
import { promptTokenEstimate } from "../quota/stream-usage-estimate.js";
import { setHeader } from "./flat-headers.js";
import type {
  Policy,
  PolicyCompileContext,
  PolicyFactory,
  PolicyRequest,
  PolicyServices,
  PolicyTenant,
} from "./policy.js";

/**
 * Tenant `tokensPerMinute` and `tokensPerDay`, fleet-wide. A request is admitted while the
 * tenant's leases on both budgets are not spent (what a response costs is known only when it
 * ends); its response's `usage` (OpenAI or Anthropic style, JSON or SSE) is read as the bytes
 * pass, without holding them (usage-scanner.ts; a compressed body through a decoded copy,
 * encoded-usage-reader.ts), and debited when the response ends, or when it is cut, with what
 * was seen. An event stream that ends without its final usage (the client or the upstream cut
 * it before OpenAI's last chunk, or it never carried one) is charged an estimate from the text
 * it carried and the request body's size (stream-usage-estimate.ts), so cutting each stream
 * just before its end reads nothing free. Upstream is asked for `accept-encoding: identity`
 * for tenants with a token limit. Spent: 429 CLAWGATE_TOKEN_BUDGET_EXHAUSTED with Retry-After
 * until the window resets. Counts clawgate_tenant_tokens_total for every tenant's response.
 */

/** The reader of each request whose response is being read, until it is debited. */
const readers = new WeakMap<PolicyRequest, UsageReader>();

function debit(request: PolicyRequest, services: PolicyServices): void {
  const reader = readers.get(request);
  const tenant = request.tenant;
  if (reader === undefined || tenant === undefined) return;
  // Once: the response's end and the request's completion both arrive here.
  readers.delete(request);
  // A compressed response is debited once its copy is decoded (encoded-usage-reader.ts).
  // The body's size as already counted (it went upstream before the response came).
  const promptTokens = promptTokenEstimate(request.bodyBytesIn);
  reader.finish(promptTokens, (tokens) => charge(tenant, tokens, services));
}

function charge(tenant: PolicyTenant, tokens: number, services: PolicyServices): void {
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
    if (tenant === undefined) return undefined;
    // Ask for the body as the scanner reads it. An upstream that compresses anyway is decoded
    // or estimated (encoded-usage-reader.ts), so this saves work; it is not what keeps count.
    if (hasTokenLimit(tenant)) {
      // A tunnel's frames carry no usage the gateway reads (Realtime APIs report it in their
      // own events): a tenant held to a token budget opens none rather than spend it unseen.
      if (isWebSocketHandshake(request))
        return { kind: "error", code: "CLAWGATE_WEBSOCKET_NOT_METERED" };
      setHeader(request.headers, "accept-encoding", "identity");
    }
    const quota = services.quota;
    if (quota === undefined) return undefined;
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
    const reader = usageReaderFor(headers);
    if (reader === undefined) return undefined;
    readers.set(request, reader);
    return {
      onData: (chunk) => reader.push(chunk),
      onEnd: () => debit(request, services),
    };
  },
  onComplete(request, _status, services) {
    // A response cut short never ended: what was seen of its usage is still owed.
    debit(request, services);
  },
} satisfies Policy);

function isWebSocketHandshake(request: PolicyRequest): boolean {
  const headers = request.req.headers;
  const protocol = headers[":protocol"];
  return (
    headers.upgrade?.toLowerCase() === "websocket" ||
    (typeof protocol === "string" && protocol.toLowerCase() === "websocket")
  );
}

function hasTokenLimit(tenant: PolicyTenant): boolean {
  return Number(tenant.source.tokensPerMinute) > 0 || Number(tenant.source.tokensPerDay) > 0;
}

export const tokenBudget: PolicyFactory = Object.freeze({
  name: "token-budget",
  compile: (context: PolicyCompileContext) => (context.tenants.size === 0 ? undefined : policy),
});
