import type { FastifyInstance } from "fastify";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigHistory } from "../history/config-history.js";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

const TOKEN = "docs-test-token-0123456789";
const METHODS = ["get", "put", "post", "delete", "patch"] as const;

interface Operation {
  security?: unknown[];
  responses: Record<string, unknown>;
  requestBody?: { content: Record<string, { schema: unknown }> };
}
type OpenApi = {
  paths: Record<string, Partial<Record<(typeof METHODS)[number], Operation>>>;
  components: { schemas: Record<string, unknown> };
};

let store: Store;
let app: FastifyInstance;
let doc: OpenApi;

beforeAll(async () => {
  store = await openEmbeddedStore({});
  app = await buildAdminApp({
    config: new ConfigService(store, "/clawgate/"),
    snapshot: {
      status: () => ({
        version: 1,
        published: true,
        publishedVersion: 1,
        counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
      }),
      hasReadStore: () => true,
    },
    fleet: { list: () => [] },
    token: TOKEN,
    metrics: new Registry(),
    history: new ConfigHistory({ store, prefix: "/clawgate/" }),
  });
  const response = await app.inject({ method: "GET", url: "/docs/json" });
  expect(response.statusCode).toBe(200);
  doc = response.json();
});

afterAll(async () => {
  await app?.close();
  await store?.close();
});

function operations(): [string, Operation][] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.flatMap((method) => {
      const operation = item[method];
      return operation === undefined ? [] : [[`${method.toUpperCase()} ${path}`, operation]];
    }),
  ) as [string, Operation][];
}

describe("admin API documentation", () => {
  it("serves the docs page, its assets and the document without a token", async () => {
    const page = await app.inject({ method: "GET", url: "/docs/" });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toContain("text/html");
    // The page loads its script and the document from these, without any token either.
    for (const url of ["/docs", "/docs/static/index.html", "/docs/static/swagger-ui-bundle.js"]) {
      const response = await app.inject({ method: "GET", url });
      expect([200, 302], url).toContain(response.statusCode);
    }
    expect((await app.inject({ method: "GET", url: "/docs/yaml" })).statusCode).toBe(200);
  });

  it("keeps the token on the API itself and on paths no route serves", async () => {
    for (const url of ["/v1/routes", "/v1/snapshot", "/metrics", "/docsx", "/v1/docs/json"]) {
      const response = await app.inject({ method: "GET", url });
      expect(response.statusCode, url).toBe(401);
      expect(response.json().error.code).toBe("CLAWGATE_UNAUTHORIZED");
    }
    const put = await app.inject({
      method: "PUT",
      url: "/v1/upstreams/agents",
      payload: { nodes: [] },
    });
    expect(put.statusCode).toBe(401);
    expect((await store.range("/clawgate/")).items).toEqual([]);
  });

  it("documents the probes and metrics, the probes as needing no token", () => {
    expect(doc.paths["/healthz"]?.get?.security).toEqual([]);
    expect(doc.paths["/readyz"]?.get?.security).toEqual([]);
    expect(Object.keys(doc.paths["/readyz"]?.get?.responses ?? {})).toEqual(
      expect.arrayContaining(["200", "503"]),
    );
    expect(doc.paths["/metrics"]?.get?.responses["200"]).toMatchObject({
      content: { "text/plain": expect.anything() },
    });
  });

  it("lists 401 on every operation that needs the token, and only there", () => {
    const all = operations();
    expect(all.length).toBeGreaterThan(10);
    for (const [name, operation] of all) {
      if (operation.security?.length === 0) {
        expect(operation.responses["401"], name).toBeUndefined();
      } else {
        expect(operation.responses["401"], name).toBeDefined();
      }
    }
    const open = all.filter(([, operation]) => operation.security?.length === 0);
    expect(open.map(([name]) => name).sort()).toEqual(["GET /healthz", "GET /readyz"]);
  });

  it("types the apply body with each kind's spec schema", () => {
    const body = doc.paths["/v1/apply"]?.post?.requestBody?.content["application/json"]?.schema;
    const text = JSON.stringify(body);
    for (const id of ["UpstreamInput", "RouteInput", "BreakerInput", "TenantInput"]) {
      expect(text).toContain(`"#/components/schemas/${id}"`);
      expect(doc.components.schemas[id], id).toBeDefined();
    }
    // PUT of one resource points at the same component.
    const put = doc.paths["/v1/upstreams/{name}"]?.put?.requestBody?.content["application/json"];
    expect(put?.schema).toEqual({ $ref: "#/components/schemas/UpstreamInput" });
  });
});

describe("roles in the OpenAPI document", () => {
  it("names the role each operation needs and documents its 403", () => {
    const byName = Object.fromEntries(operations()) as Record<
      string,
      Operation & { description?: string }
    >;
    expect(byName["GET /v1/routes"]?.description).toContain("Needs role viewer.");
    expect(byName["PUT /v1/routes/{name}"]?.description).toContain("Needs role editor.");
    expect(byName["PUT /v1/routes/{name}"]?.responses).toHaveProperty("403");
    // History is a read; a rollback writes config.
    expect(byName["GET /v1/history"]?.description).toContain("Needs role viewer.");
    expect(byName["GET /v1/history/{version}"]?.description).toContain("Needs role viewer.");
    expect(byName["POST /v1/rollback"]?.description).toContain("Needs role editor.");
    expect(Object.keys(byName["POST /v1/rollback"]?.responses ?? {})).toEqual(
      expect.arrayContaining(["200", "404", "409"]),
    );
  });
});
