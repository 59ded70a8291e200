import type { FastifyInstance } from "fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Journal } from "../journal/journal.js";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

const PREFIX = "/clawgate/";
const T0 = Date.parse("2025-03-01T12:00:00.000Z");

let store: Store;
let app: FastifyInstance;
let journal: Journal;
let now = T0;

beforeEach(async () => {
  store = await openEmbeddedStore({});
  journal = new Journal({ store, prefix: PREFIX, clock: () => now });
  app = await buildAdminApp({
    config: new ConfigService(store, PREFIX),
    snapshot: {
      status: () => ({
        version: 0,
        published: false,
        publishedVersion: null,
        counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
      }),
    },
    fleet: { list: () => [] },
    journal,
  });
  const events = [
    { upstream: "agents", node: "127.0.0.1:9001", action: "quarantine", source: "dp-1" },
    { upstream: "tools", node: "127.0.0.1:9100", action: "evict", source: "dp-1" },
    {
      upstream: "agents",
      node: "127.0.0.1:9001",
      action: "remediation_result",
      outcome: "ok",
      source: "control-plane/cp-1",
    },
  ] as const;
  for (const [i, event] of events.entries()) {
    now = T0 + i * 60_000;
    await journal.record(event);
  }
});
afterEach(async () => {
  await app.close();
  await store.close();
});

function get(url: string) {
  return app.inject({ method: "GET", url });
}

describe("GET /v1/events", () => {
  it("answers a wrong method or sub-path as a missing endpoint, not an unknown kind", async () => {
    for (const [method, url] of [
      ["POST", "/v1/events"],
      ["GET", "/v1/events/x"],
      ["PUT", "/v1/snapshot"],
    ] as const) {
      const response = await app.inject({ method, url });
      expect(response.statusCode, url).toBe(404);
      expect(response.json().error.code, `${method} ${url}`).toBe("CLAWGATE_ENDPOINT_NOT_FOUND");
    }
  });

  it("lists events newest first", async () => {
    const response = await get("/v1/events");
    expect(response.statusCode).toBe(200);
    const items = response.json().items;
    expect(items.map((e: { action: string }) => e.action)).toEqual([
      "remediation_result",
      "evict",
      "quarantine",
    ]);
    expect(items[0]).toMatchObject({
      time: "2025-03-01T12:02:00.000Z",
      upstream: "agents",
      node: "127.0.0.1:9001",
      outcome: "ok",
      source: "control-plane/cp-1",
    });
  });

  it("filters by upstream, limit and since", async () => {
    const agents = (await get("/v1/events?upstream=agents")).json().items;
    expect(agents.map((e: { action: string }) => e.action)).toEqual([
      "remediation_result",
      "quarantine",
    ]);
    expect((await get("/v1/events?limit=1")).json().items).toHaveLength(1);
    const since = (await get("/v1/events?since=2025-03-01T12:01:00Z")).json().items;
    expect(since.map((e: { action: string }) => e.action)).toEqual(["remediation_result", "evict"]);
    const sinceMs = (await get(`/v1/events?since=${T0 + 120_000}`)).json().items;
    expect(sinceMs).toHaveLength(1);
  });

  it("is described in the OpenAPI document", async () => {
    const response = await get("/docs/json");
    expect(response.statusCode).toBe(200);
    const parameters = response.json().paths["/v1/events"]?.get?.parameters ?? [];
    expect(parameters.map((p: { name: string }) => p.name).sort()).toEqual([
      "limit",
      "since",
      "type",
      "upstream",
    ]);
  });

  it("answers 400 for bad query parameters", async () => {
    for (const query of [
      "limit=0",
      "limit=5000",
      "limit=x",
      "since=yesterday",
      "upstream=Bad_Name",
      "type=everything",
    ]) {
      const response = await get(`/v1/events?${query}`);
      expect(response.statusCode, query).toBe(400);
      expect(response.json().error.code, query).toBe("CLAWGATE_INVALID_REQUEST");
    }
  });
});
