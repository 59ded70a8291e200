import type { FastifyInstance } from "fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { RangeResult, Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

// Strings the gateway writes into a request line or a header (a probe path, a rewritten
// prefix, a webhook URL) are refused with a 400 naming the field, before anything is stored.

const PREFIX = "/clawgate/";
const nodes = [{ address: "127.0.0.1:9001" }];

let store: Store;
let app: FastifyInstance;
let before: RangeResult;

beforeEach(async () => {
  store = await openEmbeddedStore({});
  app = await buildAdminApp({
    config: new ConfigService(store, PREFIX),
    snapshot: {
      status: () => ({ version: 0, published: false, publishedVersion: null, counts: counts() }),
    },
    fleet: { list: () => [] },
  });
  const seeded = await app.inject({
    method: "PUT",
    url: "/v1/upstreams/agents",
    payload: { nodes, healthCheck: { path: "/healthz" } },
  });
  expect(seeded.statusCode).toBe(201);
  before = await store.range(PREFIX);
});

afterEach(async () => {
  await app.close();
  await store.close();
});

function counts() {
  return { routes: 0, upstreams: 0, breakers: 0, tenants: 0 };
}

async function expectRefused(
  url: string,
  payload: unknown,
  field: string,
  message: RegExp,
): Promise<void> {
  const response = await app.inject({ method: "PUT", url, payload: payload as object });
  expect(response.statusCode, JSON.stringify(payload)).toBe(400);
  const { error } = response.json();
  expect(error.code).toBe("CLAWGATE_INVALID_RESOURCE");
  expect(error.message).toContain(field);
  expect(error.details).toEqual([expect.objectContaining({ path: field })]);
  expect(error.details[0].message).toMatch(message);
  // Nothing was written: same revision, same documents.
  expect(await store.range(PREFIX)).toEqual(before);
}

describe("fields that end up on the wire", () => {
  it.each([
    ["/health z", /has a space at 7/],
    ["/healthz\r\nX-Injected: 1", /control character \(U\+000D\) at 8/],
    ["/healthz\n", /control character \(U\+000A\) at 8/],
    ["/h\u00e9", /non-ASCII character \(U\+00E9\)/],
    ["/healthz#x", /"#" at 8/],
    ["healthz", /must start with "\/"/],
    [`/${"a".repeat(1024)}`, /at most 1024/],
  ])("refuses healthCheck.path %j with a 400 naming it, storing nothing", async (path, why) => {
    await expectRefused(
      "/v1/upstreams/agents",
      { nodes, healthCheck: { path } },
      "healthCheck.path",
      why,
    );
  });

  it("refuses the same path through POST /v1/apply, storing nothing", async () => {
    const response = await app.inject({
      method: "POST",
      url: "/v1/apply",
      payload: {
        resources: [
          { kind: "upstream", name: "agents", spec: { nodes, healthCheck: { path: "/a b" } } },
        ],
      },
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error.details).toEqual([
      expect.objectContaining({ kind: "upstreams", name: "agents", path: "healthCheck.path" }),
    ]);
    expect(await store.range(PREFIX)).toEqual(before);
  });

  it("refuses a line break in expectStatus and in the remediation webhook URL", async () => {
    await expectRefused(
      "/v1/upstreams/agents",
      { nodes, healthCheck: { expectStatus: "ok\r\n" } },
      "healthCheck.expectStatus",
      /control characters/,
    );
    await expectRefused(
      "/v1/upstreams/agents",
      { nodes, remediation: { webhookUrl: "http://hooks.example/x\r\ny" } },
      "remediation.webhookUrl",
      /no spaces or control characters/,
    );
  });

  it("refuses a rewrite prefix with a control character or a query", async () => {
    const route = (pathPrefix: string) => ({
      match: { pathPrefix: "/api" },
      upstream: "agents",
      rewrite: { pathPrefix },
    });
    await expectRefused(
      "/v1/routes/api",
      route("/v2\r\nX: 1"),
      "rewrite.pathPrefix",
      /control character \(U\+000D\) at 3/,
    );
    await expectRefused("/v1/routes/api", route("/v2?a=1"), "rewrite.pathPrefix", /query/);
  });

  it("accepts an origin-form path with a query, percent-encoding and no path at all", async () => {
    for (const path of ["/status?deep=1&who=%C3%A9", null]) {
      const response = await app.inject({
        method: "PUT",
        url: "/v1/upstreams/agents",
        payload: { nodes, healthCheck: { path } },
      });
      expect(response.statusCode, String(path)).toBe(200);
      expect(response.json().spec.healthCheck.path).toBe(path);
    }
  });
});
