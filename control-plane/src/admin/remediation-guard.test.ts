import type { FastifyInstance } from "fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TokenStore } from "../auth/token-store.js";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

const PREFIX = "/clawgate/";
const BOOTSTRAP = "bootstrap-token-0123456789";
const RESTART = "/usr/local/bin/restart-agent";
const HOOKS = "https://hooks.example.com";

let store: Store;
let tokens: TokenStore;
let app: FastifyInstance;
let editor: string;

beforeEach(async () => {
  store = await openEmbeddedStore({});
  tokens = new TokenStore({ store, prefix: PREFIX, bootstrapToken: BOOTSTRAP });
  await tokens.start();
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
    remediationAllowlist: { commands: [RESTART], webhookOrigins: [HOOKS] },
  });
  const created = await call(BOOTSTRAP, "POST", "/v1/tokens", { name: "ci", role: "editor" });
  expect(created.statusCode, created.body).toBe(201);
  editor = created.json().token;
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

const NODES = [{ address: "127.0.0.1:9001" }];
const HOOK = { command: [RESTART, "{port}"] };

// Review 20b H3: an editor token could make the control plane run any command.
describe("who may set an upstream's remediation", () => {
  it("refuses an editor's write that creates, changes or removes it, with 403 naming the field", async () => {
    const create = await call(editor, "PUT", "/v1/upstreams/agents", {
      nodes: NODES,
      remediation: { command: ["/bin/sh", "-c", "cat /proc/$PPID/environ"] },
    });
    expect(create.statusCode, create.body).toBe(403);
    expect(create.json().error.code).toBe("CLAWGATE_FORBIDDEN");
    expect(create.json().error.message).toMatch(
      /^upstreams\/agents: remediation may be created, changed or removed only by role admin .*token ci has role editor/,
    );
    // Not even an allowed command: who sets it is the point.
    const allowed = await call(editor, "PUT", "/v1/upstreams/agents", {
      nodes: NODES,
      remediation: HOOK,
    });
    expect(allowed.statusCode).toBe(403);
    // Nor through POST /v1/apply.
    const applied = await call(editor, "POST", "/v1/apply", {
      resources: [{ kind: "upstream", name: "agents", spec: { nodes: NODES, remediation: HOOK } }],
    });
    expect(applied.statusCode, applied.body).toBe(403);
    expect((await call(BOOTSTRAP, "GET", "/v1/upstreams/agents")).statusCode).toBe(404);

    expect(
      (await call(BOOTSTRAP, "PUT", "/v1/upstreams/agents", { nodes: NODES, remediation: HOOK }))
        .statusCode,
    ).toBe(201);
    const change = await call(editor, "PUT", "/v1/upstreams/agents", {
      nodes: NODES,
      remediation: { ...HOOK, maxAttempts: 9 },
    });
    expect(change.statusCode).toBe(403);
    const remove = await call(editor, "PUT", "/v1/upstreams/agents", { nodes: NODES });
    expect(remove.statusCode).toBe(403);
    expect(remove.json().error.message).toMatch(/may not remove it/);
  });

  it("lets an editor change the upstream's other fields, keeping remediation as it is", async () => {
    await call(BOOTSTRAP, "PUT", "/v1/upstreams/agents", { nodes: NODES, remediation: HOOK });
    const more = [...NODES, { address: "127.0.0.1:9002" }];
    const edit = await call(editor, "PUT", "/v1/upstreams/agents", {
      nodes: more,
      remediation: HOOK,
    });
    expect(edit.statusCode, edit.body).toBe(200);
    const stored = (await call(editor, "GET", "/v1/upstreams/agents")).json().spec;
    expect(stored.nodes).toHaveLength(2);
    expect(stored.remediation.command).toEqual(HOOK.command);
  });

  it("refuses, even to an admin, a command or webhook the control plane's settings do not allow (400 naming the setting)", async () => {
    const command = await call(BOOTSTRAP, "PUT", "/v1/upstreams/agents", {
      nodes: NODES,
      remediation: { command: ["/bin/sh", "-c", "id"] },
    });
    expect(command.statusCode, command.body).toBe(400);
    expect(command.json().error.message).toMatch(
      /remediation\.command\.0: \/bin\/sh is not in the control plane's remediationCommands \(CLAWGATE_REMEDIATION_COMMANDS\)/,
    );
    const webhook = await call(BOOTSTRAP, "PUT", "/v1/upstreams/agents", {
      nodes: NODES,
      remediation: { webhookUrl: "http://169.254.169.254/latest/meta-data" },
    });
    expect(webhook.statusCode, webhook.body).toBe(400);
    expect(webhook.json().error.message).toMatch(
      /remediation\.webhookUrl: the webhook's origin http:\/\/169\.254\.169\.254 is not in the control plane's remediationWebhookOrigins/,
    );
    const ok = await call(BOOTSTRAP, "PUT", "/v1/upstreams/agents", {
      nodes: NODES,
      remediation: { ...HOOK, webhookUrl: `${HOOKS}/restart?token=x` },
    });
    expect(ok.statusCode, ok.body).toBe(201);
  });
});
