import type { IncomingMessage } from "node:http";
import { create, QuotaGrantSchema, QuotaKind, RouteSchema, TenantSchema } from "@clawgate/proto";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { TenantMetrics } from "../metrics/tenant-metrics.js";
import { LeaseBook } from "../quota/lease-book.js";
import type { PolicyRequest, PolicyServices } from "./policy.js";
import { rateLimit } from "./rate-limit.js";
import { TenantKeys } from "./tenant-keys.js";
import { tokenBudget } from "./token-budget.js";

const tenant = create(TenantSchema, {
  name: "acme",
  requestsPerMinute: 2,
  tokensPerMinute: 100n,
});
const context = {
  route: create(RouteSchema, { name: "chat" }),
  tenants: new Map([["acme", tenant]]),
};

function setup() {
  const registry = new Registry();
  const book = new LeaseBook({ now: () => 0, send: () => true });
  book.setConnected(true);
  const services: PolicyServices = {
    clock: new FakeClock(),
    quota: book,
    tenantMetrics: new TenantMetrics(registry),
  };
  const grant = (kind: QuotaKind, granted: number, exhausted: boolean) =>
    book.grant(
      create(QuotaGrantSchema, {
        leases: [
          {
            tenant: "acme",
            kind,
            window: 1n,
            granted: BigInt(granted),
            resetsInMs: 42_000n,
            exhausted,
          },
        ],
      }),
    );
  return { registry, services, grant };
}

function request(): PolicyRequest {
  return {
    req: { headers: {} } as IncomingMessage,
    requestId: "r1",
    tenantKeys: TenantKeys.NONE,
    headers: ["accept-encoding", "gzip, br"],
    tenant: { name: "acme", source: tenant },
  };
}

describe("rate-limit policy", () => {
  it("waits for shares on their way for up to half a second, then refuses", () => {
    const { services } = setup();
    const policy = rateLimit.compile(context)!;
    expect(policy.onRequest(request(), services)).toBeUndefined(); // on credit
    const waiting = request();
    expect(policy.onRequest(waiting, services)?.kind).toBe("wait");
    // No grant came: a share is still asked for, so it may wait again while within the limit...
    (services.clock as FakeClock).advance(400);
    expect(policy.onRequest(waiting, services)?.kind).toBe("wait");
    // ...and is refused past it.
    (services.clock as FakeClock).advance(200);
    expect(policy.onRequest(waiting, services)).toMatchObject({
      kind: "error",
      code: "CLAWGATE_RATE_LIMITED",
    });
  });

  it("answers 429 with Retry-After until the window resets once the fleet's share is spent", () => {
    const { services, grant, registry } = setup();
    const policy = rateLimit.compile(context)!;
    grant(QuotaKind.REQUESTS_PER_MINUTE, 2, true);
    expect(policy.onRequest(request(), services)).toBeUndefined();
    expect(policy.onRequest(request(), services)).toBeUndefined();
    expect(policy.onRequest(request(), services)).toEqual({
      kind: "error",
      code: "CLAWGATE_RATE_LIMITED",
      retryAfterMs: 42_000,
    });
    policy.onComplete?.(request(), 429, services);
    return registry.metrics().then((text) => {
      expect(text).toContain('clawgate_tenant_requests_total{tenant="acme",code="429"} 1');
    });
  });

  it("lets requests without a tenant through untouched, and compiles to nothing without tenants", () => {
    const { services } = setup();
    const policy = rateLimit.compile(context)!;
    expect(policy.onRequest({ ...request(), tenant: undefined }, services)).toBeUndefined();
    expect(rateLimit.compile({ ...context, tenants: new Map() })).toBeUndefined();
  });
});

describe("token-budget policy", () => {
  it("debits the usage of a streamed response and refuses once the budget is spent", async () => {
    const { services, grant, registry } = setup();
    const policy = tokenBudget.compile(context)!;
    grant(QuotaKind.TOKENS_PER_MINUTE, 100, true);
    const req = request();
    expect(policy.onRequest(req, services)).toBeUndefined();
    // The client's gzip is replaced: the scanner reads the body as sent.
    expect(req.headers).toEqual(["accept-encoding", "identity"]);
    const observer = policy.onResponse?.(
      req,
      200,
      { "content-type": "text/event-stream" },
      services,
    );
    observer?.onData?.(Buffer.from('data: {"choices":[],"usage":{"total_tokens":'));
    observer?.onData?.(Buffer.from("120}}\n\ndata: [DONE]\n\n"));
    observer?.onEnd?.();
    policy.onComplete?.(req, 200, services);
    expect(policy.onRequest(request(), services)).toEqual({
      kind: "error",
      code: "CLAWGATE_TOKEN_BUDGET_EXHAUSTED",
      retryAfterMs: 42_000,
    });
    expect(await registry.metrics()).toContain('clawgate_tenant_tokens_total{tenant="acme"} 120');
  });

  it("debits what was seen of a response cut short", async () => {
    const { services, registry } = setup();
    const policy = tokenBudget.compile(context)!;
    const req = request();
    const observer = policy.onResponse?.(
      req,
      200,
      { "content-type": "application/json" },
      services,
    );
    observer?.onData?.(Buffer.from('{"usage":{"prompt_tokens":7,"completion_tokens":1},"choi'));
    policy.onComplete?.(req, 502, services);
    expect(await registry.metrics()).toContain('clawgate_tenant_tokens_total{tenant="acme"} 8');
  });
});
