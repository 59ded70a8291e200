import type { FastifyInstance } from "fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { NodeRegistry } from "../registry/node-registry.js";
import { registryKey } from "../registry/registry-key.js";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

const PREFIX = "/clawgate/";
const TOKEN = "registry-test-token";

let store: Store;
let app: FastifyInstance;

beforeEach(async () => {
  store = await openEmbeddedStore({});
  const config = new ConfigService(store, PREFIX);
  app = await buildAdminApp({
    config,
    snapshot: {
      status: () => ({
        version: 0,
        published: false,
        publishedVersion: null,
        counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
      }),
    },
    fleet: { list: () => [] },
    token: TOKEN,
    registry: new NodeRegistry({ store, prefix: PREFIX }),
  });
  const seeded = await config.apply([
    { kind: "upstreams", name: "agents", document: { nodes: [{ address: "127.0.0.1:9001" }] } },
  ]);
  expect(seeded.ok).toBe(true);
});
afterEach(async () => {
  await app.close();
  await store.close();
});

const auth = { authorization: `Bearer ${TOKEN}` };

function put(url: string, payload: object) {
  return app.inject({ method: "PUT", url, payload, headers: auth });
}

describe("registry routes", () => {
  it("registers (201), renews (200) and lists nodes with their source", async () => {
    const created = await put("/v1/upstreams/agents/nodes/node-1", {
      address: "127.0.0.1:9005",
      weight: 2,
      ttlSeconds: 30,
    });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({
      upstream: "agents",
      id: "node-1",
      address: "127.0.0.1:9005",
      weight: 2,
      ttlSeconds: 30,
      action: "created",
      expiresInSeconds: 30,
    });
    const kv = await store.get(registryKey(PREFIX, "agents", "node-1"));
    expect(kv?.lease).toBeDefined();

    const renewed = await put("/v1/upstreams/agents/nodes/node-1", {
      address: "127.0.0.1:9005",
      weight: 2,
      ttlSeconds: 30,
    });
    expect(renewed.statusCode).toBe(200);
    expect(renewed.json().action).toBe("renewed");

    // ttlSeconds defaults to 10.
    const other = await put("/v1/upstreams/agents/nodes/node-2", { address: "127.0.0.1:9001" });
    expect(other.json()).toMatchObject({ ttlSeconds: 10, weight: 1 });

    const list = await app.inject({ url: "/v1/upstreams/agents/nodes", headers: auth });
    expect(list.statusCode).toBe(200);
    const items = list.json().items as Record<string, unknown>[];
    expect(items.map((n) => [n.address, n.source, n.id ?? null, n.active])).toEqual([
      ["127.0.0.1:9001", "config", null, true],
      ["127.0.0.1:9005", "registry", "node-1", true],
      ["127.0.0.1:9001", "registry", "node-2", false],
    ]);
    expect(items[1]).toMatchObject({ ttlSeconds: 30, expiresInSeconds: 30 });
  });

  it("answers 404 for a missing upstream or node and 400 for bad input", async () => {
    const missing = await put("/v1/upstreams/nope/nodes/n1", { address: "127.0.0.1:9005" });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error).toMatchObject({
      code: "CLAWGATE_NOT_FOUND",
      message: "upstream nope not found",
    });
    expect((await app.inject({ url: "/v1/upstreams/nope/nodes", headers: auth })).statusCode).toBe(
      404,
    );
    const notRegistered = await app.inject({
      method: "DELETE",
      url: "/v1/upstreams/agents/nodes/n1",
      headers: auth,
    });
    expect(notRegistered.statusCode).toBe(404);

    const badTtl = await put("/v1/upstreams/agents/nodes/n1", {
      address: "127.0.0.1:9005",
      ttlSeconds: 0,
      extra: true,
    });
    expect(badTtl.statusCode).toBe(400);
    expect(badTtl.json().error.code).toBe("CLAWGATE_INVALID_REQUEST");
    expect(
      badTtl
        .json()
        .error.details.map((d: { path: string }) => d.path)
        .sort(),
    ).toEqual(["extra", "ttlSeconds"]);
    // The data plane's compiler refuses this address, so registering it would stall the fleet.
    const badAddress = await put("/v1/upstreams/agents/nodes/n1", { address: "-x..y:80" });
    expect(badAddress.statusCode).toBe(400);
    expect(badAddress.json().error.details).toContainEqual(
      expect.objectContaining({ path: "address" }),
    );
    const badId = await put("/v1/upstreams/agents/nodes/Bad_Id", { address: "127.0.0.1:9005" });
    expect(badId.statusCode).toBe(400);
    expect(badId.json().error.code).toBe("CLAWGATE_INVALID_NAME");
    expect((await store.range(`${PREFIX}registry/`)).items).toEqual([]);
  });

  it("is described in the OpenAPI document", async () => {
    const response = await app.inject({ url: "/docs/json", headers: auth });
    expect(response.statusCode).toBe(200);
    const paths = response.json().paths;
    expect(Object.keys(paths["/v1/upstreams/{name}/nodes/{id}"] ?? {}).sort()).toEqual([
      "delete",
      "put",
    ]);
    expect(paths["/v1/upstreams/{name}/nodes"]?.get).toBeDefined();
  });

  it("deregisters a node and requires the token", async () => {
    await put("/v1/upstreams/agents/nodes/n1", { address: "127.0.0.1:9005" });
    const unauthorized = await app.inject({
      method: "DELETE",
      url: "/v1/upstreams/agents/nodes/n1",
    });
    expect(unauthorized.statusCode).toBe(401);
    const deleted = await app.inject({
      method: "DELETE",
      url: "/v1/upstreams/agents/nodes/n1",
      headers: auth,
    });
    expect(deleted.statusCode).toBe(200);
    expect(deleted.json()).toMatchObject({ upstream: "agents", id: "n1" });
    expect(await store.get(registryKey(PREFIX, "agents", "n1"))).toBeUndefined();
  });
});
