import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TokenStore } from "../auth/token-store.js";
import { ConfigAudit } from "../journal/config-audit.js";
import { Journal } from "../journal/journal.js";
import { NodeRegistry } from "../registry/node-registry.js";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

const PREFIX = "/clawgate/";
const BOOTSTRAP = "bootstrap-token-0123456789";

let store: Store;
let tokens: TokenStore;
let app: FastifyInstance;
let lines: string[];

beforeEach(async () => {
  store = await openEmbeddedStore({});
  tokens = new TokenStore({ store, prefix: PREFIX, bootstrapToken: BOOTSTRAP });
  await tokens.start();
  lines = [];
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
    tokens,
    audit: new ConfigAudit({ store, prefix: PREFIX }),
    journal: new Journal({ store, prefix: PREFIX }),
    registry: new NodeRegistry({ store, prefix: PREFIX }),
    logger: pino({ level: "info" }, { write: (line: string) => lines.push(line) }),
  });
  for (const name of ["agents", "tools"]) {
    expect((await call(BOOTSTRAP, "PUT", `/v1/upstreams/${name}`, { nodes: [] })).statusCode).toBe(
      201,
    );
  }
});
afterEach(async () => {
  await app.close();
  await tokens.stop();
  await store.close();
});

function call(
  token: string,
  method: "GET" | "PUT" | "POST" | "DELETE",
  url: string,
  body?: unknown,
) {
  return app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { payload: body as object }),
  });
}

async function create(name: string, role: string, upstreams?: string[]): Promise<string> {
  const response = await call(BOOTSTRAP, "POST", "/v1/tokens", { name, role, upstreams });
  expect(response.statusCode, response.body).toBe(201);
  return response.json().token;
}

const ROUTE = { match: { pathPrefix: "/a" }, upstream: "agents" };
const NODE = { address: "127.0.0.1:9001" };

describe("roles", () => {
  it("lets each role do what it may and refuses the rest with 403 naming the role needed", async () => {
    const viewer = await create("dash", "viewer");
    const editor = await create("ci", "editor");
    const registrar = await create("agent-pool", "registrar", ["agents"]);

    expect((await call(viewer, "GET", "/v1/routes")).statusCode).toBe(200);
    const viewerWrite = await call(viewer, "PUT", "/v1/routes/a", ROUTE);
    expect(viewerWrite.statusCode).toBe(403);
    expect(viewerWrite.json().error.code).toBe("CLAWGATE_FORBIDDEN");
    expect(viewerWrite.json().error.message).toContain("needs role editor");
    expect(viewerWrite.json().error.message).toContain("token dash has role viewer");

    expect((await call(editor, "PUT", "/v1/routes/a", ROUTE)).statusCode).toBe(201);
    expect((await call(editor, "POST", "/v1/apply", { resources: [] })).statusCode).toBe(200);
    const editorTokens = await call(editor, "GET", "/v1/tokens");
    expect(editorTokens.statusCode).toBe(403);
    expect(editorTokens.json().error.message).toContain("needs role admin");

    expect((await call(registrar, "PUT", "/v1/upstreams/agents/nodes/n1", NODE)).statusCode).toBe(
      201,
    );
    expect((await call(registrar, "DELETE", "/v1/upstreams/agents/nodes/n1")).statusCode).toBe(200);
    const elsewhere = await call(registrar, "PUT", "/v1/upstreams/tools/nodes/n1", NODE);
    expect(elsewhere.statusCode).toBe(403);
    expect(elsewhere.json().error.message).toContain("only in agents, not in tools");
    const read = await call(registrar, "GET", "/v1/routes");
    expect(read.statusCode).toBe(403);
    expect(read.json().error.message).toContain("needs role viewer");
    const write = await call(registrar, "PUT", "/v1/upstreams/agents", { nodes: [] });
    expect(write.json().error.message).toContain("needs role editor");

    // An editor registers nodes anywhere; an admin does everything.
    expect((await call(editor, "PUT", "/v1/upstreams/tools/nodes/n2", NODE)).statusCode).toBe(201);
    expect((await call(BOOTSTRAP, "GET", "/v1/tokens")).statusCode).toBe(200);
  });

  it("refuses a revoked token with 401, and lists tokens without secret or hash", async () => {
    const token = await create("ci", "editor");
    const listed = await call(BOOTSTRAP, "GET", "/v1/tokens");
    expect(listed.json().items).toEqual([
      expect.objectContaining({
        name: "ci",
        role: "editor",
        upstreams: [],
        createdBy: "bootstrap",
      }),
    ]);
    expect(listed.body).not.toContain(token);
    expect(listed.body).not.toMatch(/[0-9a-f]{64}/);
    expect((await call(BOOTSTRAP, "DELETE", "/v1/tokens/ci")).statusCode).toBe(200);
    expect((await call(token, "GET", "/v1/routes")).statusCode).toBe(401);
    expect((await call(BOOTSTRAP, "DELETE", "/v1/tokens/ci")).statusCode).toBe(404);
  });

  it("refuses bad token requests with a message naming the field", async () => {
    const noUpstreams = await call(BOOTSTRAP, "POST", "/v1/tokens", {
      name: "r",
      role: "registrar",
    });
    expect(noUpstreams.statusCode).toBe(400);
    expect(noUpstreams.json().error.message).toContain("upstreams");
    const badRole = await call(BOOTSTRAP, "POST", "/v1/tokens", { name: "r", role: "root" });
    expect(badRole.statusCode).toBe(400);
    expect(badRole.json().error.message).toContain("role");
    const reserved = await call(BOOTSTRAP, "POST", "/v1/tokens", {
      name: "bootstrap",
      role: "viewer",
    });
    expect(reserved.statusCode).toBe(400);
    // The audit's name for a change made with no token: a token of that name would pass for it.
    const anonymous = await call(BOOTSTRAP, "POST", "/v1/tokens", {
      name: "anonymous",
      role: "viewer",
    });
    expect(anonymous.statusCode).toBe(400);
    expect(anonymous.json().error.message).toContain("reserved");
    await create("ci", "editor");
    const twice = await call(BOOTSTRAP, "POST", "/v1/tokens", { name: "ci", role: "viewer" });
    expect(twice.statusCode).toBe(409);
  });

  it("sees a token another replica creates and revokes, through the store's watch", async () => {
    const other = new TokenStore({ store, prefix: PREFIX });
    await other.start();
    try {
      const token = await create("ci", "editor");
      await vi.waitFor(() => expect(other.authenticate(token)?.name).toBe("ci"));
      await call(BOOTSTRAP, "DELETE", "/v1/tokens/ci");
      await vi.waitFor(() => expect(other.authenticate(token)).toBeUndefined());
    } finally {
      await other.stop();
    }
  });
});

describe("audit", () => {
  it("journals each write with the token's name, the resources changed and the revision", async () => {
    const editor = await create("ci", "editor");
    const put = await call(editor, "PUT", "/v1/routes/a", ROUTE);
    const applied = await call(editor, "POST", "/v1/apply", {
      resources: [
        { kind: "route", name: "a", spec: ROUTE },
        { kind: "route", name: "b", spec: { ...ROUTE, match: { pathPrefix: "/b" } } },
      ],
    });
    const dryRun = await call(editor, "POST", "/v1/apply", {
      dryRun: true,
      resources: [{ kind: "route", name: "c", spec: ROUTE }],
    });
    expect(dryRun.statusCode).toBe(200);
    const deleted = await call(editor, "DELETE", "/v1/routes/b");

    const events = (await call(BOOTSTRAP, "GET", "/v1/events?type=config")).json().items;
    expect(events.slice(0, 3)).toEqual([
      expect.objectContaining({
        type: "config",
        token: "ci",
        revision: deleted.json().revision,
        changes: [{ kind: "routes", name: "b", action: "deleted" }],
      }),
      expect.objectContaining({
        token: "ci",
        revision: applied.json().revision,
        // Route a was unchanged by the apply, so only b is listed.
        changes: [{ kind: "routes", name: "b", action: "created" }],
      }),
      expect.objectContaining({
        token: "ci",
        revision: Number(put.headers.etag?.toString().replace(/\D/g, "")),
        changes: [{ kind: "routes", name: "a", action: "created" }],
      }),
    ]);
    // Earlier: the token's own creation, by the bootstrap token.
    expect(events).toContainEqual(
      expect.objectContaining({
        token: "bootstrap",
        changes: [{ kind: "tokens", name: "ci", action: "created" }],
      }),
    );
    // Each event committed with its write: no revision of its own, so the store is still at the
    // last write's revision, the version data planes are sent.
    expect((await call(BOOTSTRAP, "GET", "/v1/routes")).json().revision).toBe(
      deleted.json().revision,
    );
    // The heal journal answers as before when no type is asked for.
    expect((await call(BOOTSTRAP, "GET", "/v1/events")).json().items).toEqual([]);
  });

  it("puts the token's name on the request log line, never the token", async () => {
    const editor = await create("ci", "editor");
    await call(editor, "PUT", "/v1/routes/a", ROUTE);
    const completed = lines
      .map((line) => JSON.parse(line))
      .filter((line) => line.msg === "request completed");
    expect(completed.at(-1)).toMatchObject({ token: "ci" });
    expect(lines.join("")).not.toContain(editor);
    expect(lines.join("")).not.toContain(BOOTSTRAP);
  });
});
