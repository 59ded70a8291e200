import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AdminClient,
  type ControlPlane,
  runClawctl,
  startControlPlane,
  Teardown,
} from "../support/index.js";

// One etcd and one control plane; each `it` creates its own tokens under its own names.
describe("named tokens with roles, and the audit of config writes (real etcd)", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let env: Record<string, string>;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    env = { CLAWGATE_ADMIN_URL: cp.adminUrl, CLAWGATE_ADMIN_TOKEN: cp.token };
    await cp.admin.putUpstream("agents", { nodes: [{ address: "127.0.0.1:9001", weight: 1 }] });
    await cp.admin.putUpstream("tools", { nodes: [{ address: "127.0.0.1:9002", weight: 1 }] });
  });
  afterAll(() => teardown.run());

  /** `clawctl token create`, as an operator runs it; the secret is all of stdout. */
  async function createToken(name: string, role: string, ...more: string[]) {
    const run = await runClawctl(["token", "create", name, "--role", role, ...more], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain(`token ${name} created with role ${role}`);
    return new AdminClient(cp.adminUrl, run.stdout.trim());
  }

  const route = { match: { pathPrefix: "/a" }, upstream: "agents" };
  const node = { address: "127.0.0.1:9100" };

  it("allows each role what it may and refuses the rest with 403 naming the role needed", async () => {
    const viewer = await createToken("dash", "viewer");
    const editor = await createToken("ci", "editor");
    const registrar = await createToken("pool", "registrar", "--upstream", "agents");

    expect((await viewer.request("GET", "/v1/routes")).status).toBe(200);
    const viewerWrite = await viewer.request<{ error: { code: string; message: string } }>(
      "PUT",
      "/v1/routes/a",
      route,
    );
    expect(viewerWrite.status).toBe(403);
    expect(viewerWrite.body.error.code).toBe("CLAWGATE_FORBIDDEN");
    expect(viewerWrite.body.error.message).toContain("needs role editor");

    expect((await editor.request("PUT", "/v1/routes/a", route)).status).toBe(201);
    const editorTokens = await editor.request<{ error: { message: string } }>("GET", "/v1/tokens");
    expect(editorTokens.status).toBe(403);
    expect(editorTokens.body.error.message).toContain("needs role admin");

    expect((await registrar.request("PUT", "/v1/upstreams/agents/nodes/n1", node)).status).toBe(
      201,
    );
    expect((await registrar.request("DELETE", "/v1/upstreams/agents/nodes/n1")).status).toBe(200);
    const otherUpstream = await registrar.request<{ error: { message: string } }>(
      "PUT",
      "/v1/upstreams/tools/nodes/n1",
      node,
    );
    expect(otherUpstream.status).toBe(403);
    expect(otherUpstream.body.error.message).toContain("only in agents, not in tools");
    const registrarRead = await registrar.request<{ error: { message: string } }>(
      "GET",
      "/v1/upstreams",
    );
    expect(registrarRead.status).toBe(403);
    expect(registrarRead.body.error.message).toContain("needs role viewer");

    // clawctl says the same when a viewer tries a write, and exits 1.
    const refused = await runClawctl(["delete", "route", "a"], {
      ...env,
      CLAWGATE_ADMIN_TOKEN: viewer.token,
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("needs role editor");
    expect(refused.stderr).toContain("CLAWGATE_FORBIDDEN");
  });

  it("lists tokens without their secrets, and refuses a revoked token with 401", async () => {
    const doomed = await createToken("doomed", "viewer");
    const list = await runClawctl(["token", "list"], env);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^doomed\s+viewer\s/m);
    expect(list.stdout).not.toContain(doomed.token);
    const json = await runClawctl(["token", "list", "-o", "json"], env);
    expect(json.stdout).not.toMatch(/[0-9a-f]{64}/);

    expect((await doomed.request("GET", "/v1/routes")).status).toBe(200);
    const revoke = await runClawctl(["token", "revoke", "doomed"], env);
    expect(revoke.code, revoke.stderr).toBe(0);
    expect((await doomed.request("GET", "/v1/routes")).status).toBe(401);
  });

  it("journals every write with the token's name, the resources changed and the revision", async () => {
    const writer = await createToken("deployer", "editor");
    const put = await writer.call<{ revision: number }>("PUT", "/v1/routes/audited", {
      match: { pathPrefix: "/audited" },
      upstream: "agents",
    });
    const applied = await writer.call<{ revision: number }>("POST", "/v1/apply", {
      resources: [{ kind: "upstream", name: "audited", spec: { nodes: [] } }],
    });
    const removed = await writer.call<{ revision: number }>("DELETE", "/v1/routes/audited");

    const events = await cp.admin.call<{ items: Record<string, unknown>[] }>(
      "GET",
      "/v1/events?type=config&limit=20",
    );
    const mine = events.body.items.filter((event) => event.token === "deployer");
    expect(mine).toEqual([
      expect.objectContaining({
        type: "config",
        revision: removed.body.revision,
        changes: [{ kind: "routes", name: "audited", action: "deleted" }],
      }),
      expect.objectContaining({
        revision: applied.body.revision,
        changes: [{ kind: "upstreams", name: "audited", action: "created" }],
      }),
      expect.objectContaining({
        revision: put.body.revision,
        changes: [{ kind: "routes", name: "audited", action: "created" }],
      }),
    ]);
    // Who made the token is journaled too: the bootstrap token, CLAWGATE_ADMIN_TOKEN.
    expect(events.body.items).toContainEqual(
      expect.objectContaining({
        token: "bootstrap",
        changes: [{ kind: "tokens", name: "deployer", action: "created" }],
      }),
    );
    // clawctl shows the same journal as a table.
    const table = await runClawctl(["events", "--type", "config"], env);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(
      new RegExp(`\\sdeployer\\s+${removed.body.revision}\\s+deleted routes/audited\n`),
    );
    // The heal journal's answer is unchanged when no type is asked for.
    const heal = await cp.admin.call<{ items: unknown[] }>("GET", "/v1/events");
    expect(heal.body.items).toEqual([]);

    // The control plane's request log names the token, never its secret.
    const log = cp.process.output.text(2_000);
    expect(log).toMatch(
      /"token":"deployer"[^\n]*"request completed"|"request completed"[^\n]*"token":"deployer"/,
    );
    expect(log).not.toContain(writer.token);
    expect(log).not.toContain(cp.token);
  });
});
