import { Writable } from "node:stream";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { DataPlaneView } from "../fleet/data-plane-view.js";
import { ConfigService } from "../resources/config-service.js";
import type { SnapshotStatus } from "../snapshot/snapshot-status.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

const PREFIX = "/clawgate/";
const agents = { nodes: [{ address: "127.0.0.1:9001", weight: 3 }] };
const apiRoute = { match: { pathPrefix: "/api" }, upstream: "agents" };

const status: SnapshotStatus = {
  version: 7,
  published: true,
  publishedVersion: 7,
  counts: { routes: 1, upstreams: 1, breakers: 0, tenants: 0 },
};
const dataPlane: DataPlaneView = {
  nodeId: "dp-1",
  hostname: "host-a",
  softwareVersion: "0.1.0",
  connected: true,
  state: "SYNCED",
  appliedVersion: 7,
  publishedVersion: 7,
  lastSeen: "2025-01-01T00:00:00.000Z",
};

let store: Store;
let app: FastifyInstance;

async function build(extra: { token?: string; metrics?: Registry; logger?: pino.Logger } = {}) {
  return buildAdminApp({
    config: new ConfigService(store, PREFIX),
    snapshot: { status: () => status },
    fleet: { list: () => [dataPlane] },
    ...extra,
  });
}

beforeEach(async () => {
  store = await openEmbeddedStore({});
  app = await build();
});

afterEach(async () => {
  await app.close();
  await store.close();
});

function put(url: string, body: unknown, headers: Record<string, string> = {}) {
  return app.inject({ method: "PUT", url, payload: body as object, headers });
}

async function seed(): Promise<void> {
  expect((await put("/v1/upstreams/agents", agents)).statusCode).toBe(201);
  expect((await put("/v1/routes/api", apiRoute)).statusCode).toBe(201);
}

describe("admin API resources", () => {
  it("creates an upstream and a route as written, answering 201 with the defaulted resource", async () => {
    const created = await put("/v1/upstreams/agents", agents);
    expect(created.statusCode).toBe(201);
    const body = created.json();
    expect(body.name).toBe("agents");
    expect(body.spec.nodes).toEqual([{ address: "127.0.0.1:9001", weight: 3 }]);
    expect(body.spec.healthCheck.unhealthyThreshold).toBe(2);
    expect(created.headers.etag).toBe(`"${body.revision}"`);
    expect(created.headers.location).toBe("/v1/upstreams/agents");

    const route = await put("/v1/routes/api", apiRoute);
    expect(route.statusCode).toBe(201);
    expect(route.json().spec).toMatchObject({ match: { pathPrefix: "/api" }, upstream: "agents" });

    const read = await app.inject({ method: "GET", url: "/v1/routes/api" });
    expect(read.statusCode).toBe(200);
    expect(read.json()).toEqual(route.json());
    expect(read.headers.etag).toBe(route.headers.etag);

    const updated = await put("/v1/upstreams/agents", { nodes: [{ address: "127.0.0.1:9002" }] });
    expect(updated.statusCode).toBe(200);
    expect(updated.json().revision).toBeGreaterThan(body.revision);
  });

  it("lists a kind with the store revision", async () => {
    await seed();
    const list = await app.inject({ method: "GET", url: "/v1/upstreams" });
    expect(list.statusCode).toBe(200);
    const body = list.json();
    expect(body.items).toHaveLength(1);
    expect(body.items[0]).toMatchObject({ name: "agents", spec: { nodes: agents.nodes } });
    expect(body.revision).toBeGreaterThanOrEqual(body.items[0].revision);
    expect((await app.inject({ method: "GET", url: "/v1/tenants" })).json().items).toEqual([]);
  });

  it("answers 400 naming each bad field", async () => {
    const bad = await put("/v1/upstreams/agents", {
      nodes: [{ address: "127.0.0.1:9001", weight: 0 }],
      keepAliveTimeoutMs: 600_001,
      colour: "red",
    });
    expect(bad.statusCode).toBe(400);
    const { error } = bad.json();
    expect(error.code).toBe("CLAWGATE_INVALID_RESOURCE");
    const paths = error.details.map((detail: { path: string }) => detail.path);
    expect(paths).toEqual(
      expect.arrayContaining(["nodes.0.weight", "keepAliveTimeoutMs", "colour"]),
    );

    const route = await put("/v1/routes/api", { match: {}, upstream: "agents" });
    expect(route.statusCode).toBe(400);
    expect(route.json().error.details).toContainEqual(
      expect.objectContaining({ path: "match.pathPrefix" }),
    );
    expect((await app.inject({ method: "GET", url: "/v1/upstreams" })).json().items).toEqual([]);
  });

  it("answers 400 for what every data plane's compiler would refuse", async () => {
    const address = await put("/v1/upstreams/agents", { nodes: [{ address: "-x..y:80" }] });
    expect(address.statusCode).toBe(400);
    expect(address.json().error.details).toContainEqual(
      expect.objectContaining({ path: "nodes.0.address" }),
    );
    expect((await put("/v1/upstreams/agents", agents)).statusCode).toBe(201);

    const cases: [unknown, string][] = [
      [{ match: { pathPrefix: "/a b" }, upstream: "agents" }, "match.pathPrefix"],
      [{ match: { hosts: ["*"], pathPrefix: "/" }, upstream: "agents" }, "match.hosts.0"],
      [{ match: { path: "/x?y" }, upstream: "agents" }, "match.path"],
      // No request path can ever match these: the proxy refuses them with 400.
      [{ match: { pathPrefix: "/a%2Fb" }, upstream: "agents" }, "match.pathPrefix"],
      [{ match: { path: "/a/..;/b" }, upstream: "agents" }, "match.path"],
      [
        { match: { pathPrefix: "/" }, upstream: "agents", rewrite: { host: "a b" } },
        "rewrite.host",
      ],
      [
        {
          match: { pathPrefix: "/" },
          split: [
            { upstream: "agents", weight: 1 },
            { upstream: "agents", weight: 2 },
          ],
        },
        "split.1.upstream",
      ],
    ];
    for (const [spec, path] of cases) {
      const response = await put("/v1/routes/api", spec);
      expect(response.statusCode, path).toBe(400);
      expect(response.json().error.details).toContainEqual(expect.objectContaining({ path }));
    }
    expect((await app.inject({ method: "GET", url: "/v1/routes" })).json().items).toEqual([]);
  });

  it("answers 400 for a bad name and for a body that is not JSON", async () => {
    const name = await put("/v1/upstreams/Not_Valid", agents);
    expect(name.statusCode).toBe(400);
    expect(name.json().error.code).toBe("CLAWGATE_INVALID_NAME");

    const notJson = await app.inject({
      method: "PUT",
      url: "/v1/upstreams/agents",
      payload: "{nodes:",
      headers: { "content-type": "application/json" },
    });
    expect(notJson.statusCode).toBe(400);
    expect(notJson.json().error.code).toBe("CLAWGATE_INVALID_REQUEST");
  });

  it("stores prototype keys as names and header conditions; refuses a __proto__ key", async () => {
    // Issue 8: every key a user picks is data, never a member of Object.prototype.
    expect((await put("/v1/breakers/constructor", {})).statusCode).toBe(201);
    expect(
      (await put("/v1/upstreams/prototype", { ...agents, breaker: "constructor" })).statusCode,
    ).toBe(201);
    const headers = { constructor: "a", toString: "b", valueOf: "c", hasOwnProperty: "d" };
    const route = await put("/v1/routes/constructor", {
      match: { pathPrefix: "/", hosts: ["constructor"], headers },
      upstream: "prototype",
    });
    expect(route.statusCode).toBe(201);
    expect(route.json().spec.match.headers).toEqual(headers);
    expect(
      (await put("/v1/tenants/constructor", { allowedRoutes: ["constructor"] })).statusCode,
    ).toBe(201);
    const listed = await app.inject({ method: "GET", url: "/v1/routes" });
    expect(listed.json().items.map((item: { name: string }) => item.name)).toEqual(["constructor"]);

    // node:http drops a "__proto__" request header, so such a condition could never hold; the
    // JSON parser refuses the key anywhere in a body rather than silently losing it.
    const poisoned = await app.inject({
      method: "PUT",
      url: "/v1/routes/poisoned",
      payload: '{"match":{"pathPrefix":"/","headers":{"__proto__":"x"}},"upstream":"prototype"}',
      headers: { "content-type": "application/json" },
    });
    expect(poisoned.statusCode).toBe(400);
    expect((await app.inject({ method: "GET", url: "/v1/routes/poisoned" })).statusCode).toBe(404);
  });

  it("answers 409 for a route to a missing upstream", async () => {
    const response = await put("/v1/routes/api", apiRoute);
    expect(response.statusCode).toBe(409);
    expect(response.json().error).toMatchObject({
      code: "CLAWGATE_REFERENCE_CONFLICT",
      message: "route api names upstream agents, which does not exist",
    });
    expect((await app.inject({ method: "GET", url: "/v1/routes/api" })).statusCode).toBe(404);
  });

  it("answers 409 naming the routes when deleting an upstream they use, then deletes in order", async () => {
    await seed();
    const refused = await app.inject({ method: "DELETE", url: "/v1/upstreams/agents" });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error.message).toBe("upstream agents is used by routes api");
    expect((await app.inject({ method: "GET", url: "/v1/upstreams/agents" })).statusCode).toBe(200);

    expect((await app.inject({ method: "DELETE", url: "/v1/routes/api" })).statusCode).toBe(200);
    expect((await app.inject({ method: "DELETE", url: "/v1/upstreams/agents" })).statusCode).toBe(
      200,
    );
    const gone = await app.inject({ method: "DELETE", url: "/v1/upstreams/agents" });
    expect(gone.statusCode).toBe(404);
    expect(gone.json().error.code).toBe("CLAWGATE_NOT_FOUND");
  });

  it("honours If-Match on PUT and DELETE", async () => {
    await seed();
    const etag = (await app.inject({ method: "GET", url: "/v1/upstreams/agents" })).headers.etag;
    expect(etag).toMatch(/^"\d+"$/);
    const revision = Number(String(etag).slice(1, -1));
    const stale = await put("/v1/upstreams/agents", agents, { "if-match": `"${revision + 1}"` });
    expect(stale.statusCode).toBe(412);
    expect(stale.json().error.code).toBe("CLAWGATE_PRECONDITION_FAILED");

    const matching = await put(
      "/v1/upstreams/agents",
      { nodes: [{ address: "127.0.0.1:9003" }] },
      { "if-match": String(etag) },
    );
    expect(matching.statusCode).toBe(200);
    const newTag = String(matching.headers.etag);
    expect(newTag).not.toBe(etag);

    const staleDelete = await app.inject({
      method: "DELETE",
      url: "/v1/routes/api",
      headers: { "if-match": '"999"' },
    });
    expect(staleDelete.statusCode).toBe(412);
    const routeTag = (await app.inject({ method: "GET", url: "/v1/routes/api" })).headers.etag;
    const okDelete = await app.inject({
      method: "DELETE",
      url: "/v1/routes/api",
      headers: { "if-match": String(routeTag) },
    });
    expect(okDelete.statusCode).toBe(200);
  });

  it("answers 404 JSON for an unknown kind and an unknown endpoint", async () => {
    const kind = await app.inject({ method: "GET", url: "/v1/widgets/x" });
    expect(kind.statusCode).toBe(404);
    expect(kind.json().error.code).toBe("CLAWGATE_UNKNOWN_KIND");
    const list = await app.inject({ method: "GET", url: "/v1/widgets" });
    expect(list.json().error.code).toBe("CLAWGATE_UNKNOWN_KIND");
    const other = await app.inject({ method: "GET", url: "/nowhere" });
    expect(other.statusCode).toBe(404);
    expect(other.json().error.code).toBe("CLAWGATE_ENDPOINT_NOT_FOUND");
  });
});

describe("POST /v1/apply", () => {
  const manifest = [
    { kind: "upstream", name: "agents", spec: agents },
    { kind: "routes", name: "api", spec: apiRoute },
  ];

  it("applies several resources atomically, accepting singular and plural kinds", async () => {
    const response = await app.inject({
      method: "POST",
      url: "/v1/apply",
      payload: { resources: manifest },
    });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body.dryRun).toBe(false);
    expect(body.results).toEqual([
      { kind: "upstreams", name: "agents", action: "created", revision: body.revision },
      { kind: "routes", name: "api", action: "created", revision: body.revision },
    ]);
  });

  it("dry run reports what would happen and changes nothing", async () => {
    const before = await store.range("");
    const response = await app.inject({
      method: "POST",
      url: "/v1/apply",
      payload: { resources: manifest, dryRun: true },
    });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({
      dryRun: true,
      results: [{ action: "created" }, { action: "created" }],
    });
    expect(await store.range("")).toEqual(before);
  });

  it("refuses the whole set when one resource is bad", async () => {
    const response = await app.inject({
      method: "POST",
      url: "/v1/apply",
      payload: {
        resources: [...manifest, { kind: "breaker", name: "b", spec: { windowMs: 5 } }],
      },
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error.details).toEqual([
      expect.objectContaining({ kind: "breakers", name: "b", path: "windowMs" }),
    ]);
    expect((await app.inject({ method: "GET", url: "/v1/upstreams" })).json().items).toEqual([]);

    const unknown = await app.inject({
      method: "POST",
      url: "/v1/apply",
      payload: { resources: [{ kind: "widget", name: "w", spec: {} }] },
    });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error.details).toEqual([
      expect.objectContaining({ path: "resources.0.kind" }),
    ]);

    // A bad name is named by its place in the request too.
    const badName = await app.inject({
      method: "POST",
      url: "/v1/apply",
      payload: {
        resources: [
          { kind: "breaker", name: "fine", spec: {} },
          { kind: "breaker", name: "Not_OK", spec: {} },
        ],
      },
    });
    expect(badName.statusCode).toBe(400);
    expect(badName.json().error.details).toEqual([
      expect.objectContaining({ path: "resources.1.name" }),
    ]);
    expect(badName.json().error.message).toContain("resources.1.name");
  });

  it("prunes what the set does not name", async () => {
    await seed();
    await put("/v1/upstreams/spare", agents);
    const response = await app.inject({
      method: "POST",
      url: "/v1/apply",
      payload: { resources: manifest, prune: true },
    });
    expect(response.statusCode).toBe(200);
    expect(response.json().results).toContainEqual(
      expect.objectContaining({ kind: "upstreams", name: "spare", action: "deleted" }),
    );
    expect((await app.inject({ method: "GET", url: "/v1/upstreams/spare" })).statusCode).toBe(404);
    expect((await app.inject({ method: "GET", url: "/v1/upstreams/agents" })).statusCode).toBe(200);
  });

  it("answers 400 for a body of the wrong shape", async () => {
    const response = await app.inject({
      method: "POST",
      url: "/v1/apply",
      payload: { items: [] },
    });
    expect(response.statusCode).toBe(400);
    const paths = response.json().error.details.map((detail: { path: string }) => detail.path);
    expect(paths).toEqual(expect.arrayContaining(["resources", "items"]));
  });
});

describe("admin API status routes", () => {
  it("serves snapshot status, data planes, health and OpenAPI", async () => {
    expect((await app.inject({ method: "GET", url: "/v1/snapshot" })).json()).toEqual(status);
    expect((await app.inject({ method: "GET", url: "/v1/dataplanes" })).json()).toEqual({
      items: [dataPlane],
    });
    expect((await app.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);
    const docs = await app.inject({ method: "GET", url: "/docs/json" });
    expect(docs.statusCode).toBe(200);
    const paths = Object.keys(docs.json().paths);
    expect(paths).toEqual(
      expect.arrayContaining(["/v1/upstreams/{name}", "/v1/routes", "/v1/apply", "/v1/snapshot"]),
    );
    expect(docs.json().paths["/v1/upstreams/{name}"].put.requestBody).toBeDefined();
    expect((await app.inject({ method: "GET", url: "/metrics" })).statusCode).toBe(404);
  });

  it("serves the metrics registry in Prometheus text", async () => {
    const registry = new Registry();
    const { Gauge } = await import("prom-client");
    new Gauge({ name: "clawgate_snapshot_version", help: "v", registers: [registry] }).set(7);
    const withMetrics = await build({ metrics: registry });
    const response = await withMetrics.inject({ method: "GET", url: "/metrics" });
    expect(response.statusCode).toBe(200);
    expect(response.headers["content-type"]).toContain("text/plain");
    expect(response.body).toContain("clawgate_snapshot_version 7");
    await withMetrics.close();
  });
});

describe("admin API bearer token", () => {
  const token = "s3cret-token-value-0123456789";

  it("requires the token on /v1 and /metrics but not /healthz or /docs, and never logs it", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const logger = pino({ level: "trace" }, sink);
    const secured = await build({ token, metrics: new Registry(), logger });
    for (const url of ["/v1/upstreams", "/v1/snapshot", "/metrics", "/v1/widgets"]) {
      const missing = await secured.inject({ method: "GET", url });
      expect(missing.statusCode, url).toBe(401);
      expect(missing.json().error.code).toBe("CLAWGATE_UNAUTHORIZED");
    }
    const wrong = await secured.inject({
      method: "GET",
      url: "/v1/upstreams",
      headers: { authorization: `Bearer ${token}x` },
    });
    expect(wrong.statusCode).toBe(401);
    const put401 = await secured.inject({
      method: "PUT",
      url: "/v1/upstreams/agents",
      payload: agents,
    });
    expect(put401.statusCode).toBe(401);
    expect((await store.range("")).items).toEqual([]);

    const auth = { authorization: `Bearer ${token}` };
    for (const url of ["/v1/upstreams", "/v1/snapshot", "/metrics", "/docs/json"]) {
      const allowed = await secured.inject({ method: "GET", url, headers: auth });
      expect(allowed.statusCode, url).toBe(200);
    }
    const created = await secured.inject({
      method: "PUT",
      url: "/v1/upstreams/agents",
      payload: agents,
      headers: auth,
    });
    expect(created.statusCode).toBe(201);
    expect((await secured.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);
    expect((await secured.inject({ method: "GET", url: "/docs/json" })).statusCode).toBe(200);
    await secured.close();

    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join("")).not.toContain(token);
  });
});

describe("admin API bodies", () => {
  it("reads an empty JSON body as none: DELETE works, PUT is invalid", async () => {
    await put("/v1/tenants/acme", {});
    const json = { "content-type": "application/json" };
    const put400 = await app.inject({
      method: "PUT",
      url: "/v1/tenants/x",
      payload: "",
      headers: json,
    });
    expect(put400.statusCode).toBe(400);
    expect(put400.json().error.code).toBe("CLAWGATE_INVALID_RESOURCE");
    const deleted = await app.inject({ method: "DELETE", url: "/v1/tenants/acme", headers: json });
    expect(deleted.statusCode).toBe(200);
  });
});
