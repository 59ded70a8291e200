import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { TokenStore } from "../auth/token-store.js";
import { ConfigHistory } from "../history/config-history.js";
import { ConfigAudit } from "../journal/config-audit.js";
import { Journal } from "../journal/journal.js";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

// The embedded store keeps no MVCC history at all: every rebuild here comes from the entries.
const PREFIX = "/clawgate/";
const BOOTSTRAP = "bootstrap-token-0123456789";

let store: Store;
let tokens: TokenStore;
let config: ConfigService;
let app: FastifyInstance;

async function setUp(limit?: number) {
  store = await openEmbeddedStore({});
  tokens = new TokenStore({ store, prefix: PREFIX, bootstrapToken: BOOTSTRAP });
  await tokens.start();
  const history = new ConfigHistory({ store, prefix: PREFIX, limit });
  await history.start();
  config = new ConfigService(store, PREFIX);
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
    tokens,
    audit: new ConfigAudit({ store, prefix: PREFIX }),
    journal: new Journal({ store, prefix: PREFIX }),
    history,
  });
  const editor = await token("alice", "editor");
  const viewer = await token("val", "viewer");
  return { editor, viewer };
}

afterEach(async () => {
  await app.close();
  await config.close();
  await tokens.stop();
  await store.close();
});

function call(token: string, method: "GET" | "PUT" | "POST", url: string, body?: unknown) {
  return app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { payload: body as object }),
  });
}

async function token(name: string, role: string): Promise<string> {
  const response = await call(BOOTSTRAP, "POST", "/v1/tokens", { name, role });
  expect(response.statusCode).toBe(201);
  return response.json().token;
}

/** Three versions: an upstream, a route to it, the upstream moved to another node. */
async function writeThreeVersions(editor: string): Promise<[number, number, number]> {
  const v1 = await call(editor, "PUT", "/v1/upstreams/agents", {
    nodes: [{ address: "127.0.0.1:9001" }],
  });
  const v2 = await call(editor, "PUT", "/v1/routes/api", {
    match: { pathPrefix: "/api" },
    upstream: "agents",
  });
  const v3 = await call(editor, "PUT", "/v1/upstreams/agents", {
    nodes: [{ address: "127.0.0.1:9002" }],
  });
  for (const response of [v1, v2, v3]) expect(response.statusCode).toBeLessThan(300);
  return [v1.json().revision, v2.json().revision, v3.json().revision];
}

describe("config history and rollback", () => {
  it("lists each version with its author and changes, newest first", async () => {
    const { editor, viewer } = await setUp();
    const [v1, v2, v3] = await writeThreeVersions(editor);
    const listed = await call(viewer, "GET", "/v1/history");
    expect(listed.statusCode).toBe(200);
    const items = listed.json().items;
    expect(items.map((item: { version: number }) => item.version)).toEqual([v3, v2, v1]);
    expect(items.map((item: { author: string }) => item.author)).toEqual([
      "alice",
      "alice",
      "alice",
    ]);
    expect(items[0].changes).toEqual([{ kind: "upstreams", name: "agents", action: "updated" }]);
    expect(items[1]).toMatchObject({ summary: "1 created" });
    expect(items[1].changes).toEqual([{ kind: "routes", name: "api", action: "created" }]);
  });

  it("shows the whole config as it was at a version", async () => {
    const { editor, viewer } = await setUp();
    const [v1, v2] = await writeThreeVersions(editor);
    const atV1 = (await call(viewer, "GET", `/v1/history/${v1}`)).json();
    expect(atV1.version).toBe(v1);
    expect(atV1.resources).toEqual([
      expect.objectContaining({
        kind: "upstreams",
        name: "agents",
        spec: expect.objectContaining({ nodes: [{ address: "127.0.0.1:9001", weight: 1 }] }),
      }),
    ]);
    const atV2 = (await call(viewer, "GET", `/v1/history/${v2}`)).json();
    expect(atV2.resources.map((r: { name: string }) => r.name)).toEqual(["api", "agents"]);
  });

  it("rolls back as a new version that data planes would be sent, journaled with from and to", async () => {
    const { editor, viewer } = await setUp();
    const [v1, v2, v3] = await writeThreeVersions(editor);
    // Rollback is a config write: a viewer is refused, naming the role needed.
    const refused = await call(viewer, "POST", "/v1/rollback", { version: v1 });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.message).toContain("editor");

    const rolled = await call(editor, "POST", "/v1/rollback", { version: v1 });
    expect(rolled.statusCode).toBe(200);
    const body = rolled.json();
    expect(body).toMatchObject({ from: v3, to: v1 });
    expect(body.revision).toBeGreaterThan(v3);

    expect((await call(viewer, "GET", "/v1/routes/api")).statusCode).toBe(404);
    const upstream = (await call(viewer, "GET", "/v1/upstreams/agents")).json();
    expect(upstream.spec.nodes).toEqual([{ address: "127.0.0.1:9001", weight: 1 }]);

    const items = (await call(viewer, "GET", "/v1/history")).json().items;
    expect(items).toHaveLength(4);
    expect(items[0]).toMatchObject({
      version: body.revision,
      author: "alice",
      rollback: { from: v3, to: v1 },
    });
    // Earlier versions stay reachable through the rollback: history only grows.
    const atV2 = (await call(viewer, "GET", `/v1/history/${v2}`)).json();
    expect(atV2.resources.map((r: { name: string }) => r.name)).toEqual(["api", "agents"]);

    const events = (await call(viewer, "GET", "/v1/events?type=config&limit=1")).json();
    expect(events.items[0]).toMatchObject({ token: "alice", rollback: { from: v3, to: v1 } });
  });

  it("answers 404 for a version never written and 409 for one no longer kept", async () => {
    const { editor } = await setUp(2);
    const [v1, , v3] = await writeThreeVersions(editor);
    const unknown = await call(editor, "POST", "/v1/rollback", { version: v3 + 100 });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error).toMatchObject({ code: "CLAWGATE_VERSION_NOT_FOUND" });
    expect(unknown.json().error.message).toContain(`version ${v3 + 100}`);
    const old = await call(editor, "POST", "/v1/rollback", { version: v1 });
    expect(old.statusCode).toBe(409);
    expect(old.json().error).toMatchObject({ code: "CLAWGATE_VERSION_TOO_OLD" });
    expect(old.json().error.message).toContain("older than the oldest kept");
    expect((await call(editor, "GET", `/v1/history/${v1}`)).statusCode).toBe(409);
    expect((await call(editor, "POST", "/v1/rollback", { version: "x" })).statusCode).toBe(400);
  });
});
