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

function request(bodyBytesIn?: number): PolicyRequest {
  return {
    req: { headers: {} } as IncomingMessage,
    requestId: "r1",
    tenantKeys: TenantKeys.NONE,
    headers: ["accept-encoding", "gzip, br"],
    tenant: { name: "acme", source: tenant },
    bodyBytesIn,
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

  // OpenAI-style streams report usage only in their last chunk: a stream cut before it (by the
  // client, or by an upstream that breaks) is charged an estimate, never 0. The rule
  // (stream-usage-estimate.ts): output = max(ceil(content bytes / 4), content events), plus
  // the prompt at ceil(request body bytes / 4).
  const chunk = (content: string) =>
    `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }], usage: null })}\n\n`;
  const tokensOf = async (registry: Registry) => {
    const line = (await registry.metrics())
      .split("\n")
      .find((l) => l.startsWith('clawgate_tenant_tokens_total{tenant="acme"}'));
    return line === undefined ? 0 : Number(line.split(" ").at(-1));
  };

  it.each([
    // [what, content deltas, request body bytes, how the response ends, tokens]
    [
      "the client aborts after 3 long deltas, before the usage chunk",
      ["x".repeat(40), "y".repeat(40), "z".repeat(40)],
      100,
      "cut",
      25 + 30,
    ],
    [
      "the upstream breaks after 5 one-byte deltas, before the usage chunk",
      ["a", "b", "c", "d", "e"],
      100,
      "upstream error",
      25 + 5,
    ],
    ["a stream of multi-byte text is cut (its UTF-8 bytes count)", ["✓✓✓✓"], 0, "cut", 3],
    ["a stream ends without any usage chunk", ["hel", "lo"], 27, "end", 7 + 2],
    ["a stream is cut after a body of unknown size (no prompt)", ["hello"], undefined, "cut", 2],
  ] as const)("charges an estimate when %s", async (_what, deltas, bodyBytes, end, expected) => {
    const { services, registry } = setup();
    const policy = tokenBudget.compile(context)!;
    const req = request(bodyBytes);
    const observer = policy.onResponse?.(
      req,
      200,
      { "content-type": "text/event-stream" },
      services,
    );
    for (const content of deltas) observer?.onData?.(Buffer.from(chunk(content)));
    if (end === "end") observer?.onEnd?.();
    // A cut response never ends: its completion alone debits it.
    policy.onComplete?.(req, end === "upstream error" ? 502 : 200, services);
    expect(await tokensOf(registry)).toBe(expected);
  });

  it("spends the budget with those estimates where a cut stream cost nothing before", () => {
    const { services, grant } = setup();
    const policy = tokenBudget.compile(context)!;
    grant(QuotaKind.TOKENS_PER_MINUTE, 100, true);
    const req = request(200); // 50 tokens of prompt
    expect(policy.onRequest(req, services)).toBeUndefined();
    const observer = policy.onResponse?.(
      req,
      200,
      { "content-type": "text/event-stream" },
      services,
    );
    for (const content of ["x".repeat(100), "y".repeat(100)]) {
      observer?.onData?.(Buffer.from(chunk(content)));
    }
    policy.onComplete?.(req, 200, services); // 50 + 50: the 100-token budget is spent
    expect(policy.onRequest(request(), services)).toMatchObject({
      code: "CLAWGATE_TOKEN_BUDGET_EXHAUSTED",
    });
  });

  it("charges a cut Anthropic stream its reported input plus the output estimate", async () => {
    const { services, registry } = setup();
    const policy = tokenBudget.compile(context)!;
    const req = request(4000);
    const observer = policy.onResponse?.(
      req,
      200,
      { "content-type": "text/event-stream" },
      services,
    );
    const events = [
      {
        type: "message_start",
        message: { content: [], usage: { input_tokens: 25, output_tokens: 1 } },
      },
      {
        type: "content_block_delta",
        index: 0,
        delta: { type: "text_delta", text: "t".repeat(40) },
      },
      {
        type: "content_block_delta",
        index: 0,
        delta: { type: "text_delta", text: "u".repeat(40) },
      },
    ];
    for (const event of events)
      observer?.onData?.(Buffer.from(`data: ${JSON.stringify(event)}\n\n`));
    policy.onComplete?.(req, 200, services);
    // message_start's output_tokens is only a first count; its input stands for the prompt.
    expect(await tokensOf(registry)).toBe(25 + 20);
  });

  it("charges a complete stream exactly the usage it reported, whatever the estimate", async () => {
    const { services, registry } = setup();
    const policy = tokenBudget.compile(context)!;
    const req = request(1_000_000);
    const observer = policy.onResponse?.(
      req,
      200,
      { "content-type": "text/event-stream" },
      services,
    );
    for (const content of ["x".repeat(400), "y".repeat(400)]) {
      observer?.onData?.(Buffer.from(chunk(content)));
    }
    observer?.onData?.(
      Buffer.from(
        'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}\n\n',
      ),
    );
    observer?.onData?.(Buffer.from("data: [DONE]\n\n"));
    observer?.onEnd?.();
    policy.onComplete?.(req, 200, services);
    expect(await tokensOf(registry)).toBe(11);
  });
});
