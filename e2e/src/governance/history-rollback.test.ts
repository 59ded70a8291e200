import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  makeWorkDir,
  type NamedUpstream,
  removeWorkDir,
  runClawctl,
  send,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitForConvergence,
  whoAnswered,
} from "../support/index.js";

interface HistoryItem {
  version: number;
  author: string;
  changes: { kind: string; name: string; action: string }[];
  rollback?: { from: number; to: number };
}

// Steps build on each other (three versions, then history, then rollback), so one story.
describe("config history and rollback against a real etcd, served by a data plane", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;
  let one: NamedUpstream;
  let two: NamedUpstream;
  let dir: string;
  let env: Record<string, string>;
  const versions: number[] = [];

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    one = await startNamedUpstream("one");
    teardown.add("upstream one", () => one.close());
    two = await startNamedUpstream("two");
    teardown.add("upstream two", () => two.close());
    dir = await makeWorkDir("history");
    teardown.add("work dir", () => removeWorkDir(dir));
    // Writes are made with a named editor token, so history names its author.
    const created = await runClawctl(["token", "create", "alice", "--role", "editor"], {
      CLAWGATE_ADMIN_URL: cp.adminUrl,
      CLAWGATE_ADMIN_TOKEN: cp.token,
    });
    expect(created.code, created.stderr).toBe(0);
    env = { CLAWGATE_ADMIN_URL: cp.adminUrl, CLAWGATE_ADMIN_TOKEN: created.stdout.trim() };
  });
  afterAll(() => teardown.run());

  const clawctl = (...args: string[]) => runClawctl(args, env, { cwd: dir });

  /** Applies a manifest with clawctl; resolves with the config revision it printed. */
  async function apply(name: string, manifest: string): Promise<number> {
    await writeFile(join(dir, name), manifest);
    const run = await clawctl("apply", "-f", name);
    expect(run.code, run.stderr).toBe(0);
    const revision = /config revision (\d+)/.exec(run.stdout)?.[1];
    expect(revision, run.stdout).toBeDefined();
    return Number(revision);
  }

  const upstream = (address: string) =>
    `kind: upstream\nname: agents\nspec:\n  nodes:\n    - address: ${address}\n`;
  const route = (name: string, prefix: string) =>
    `kind: route\nname: ${name}\nspec:\n  match: { pathPrefix: ${prefix} }\n  upstream: agents\n`;

  it("keeps three versions with their author and changes", async () => {
    versions.push(await apply("v1.yaml", `${upstream(one.address)}---\n${route("api", "/api")}`));
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    versions.push(await apply("v2.yaml", route("v2", "/v2")));
    versions.push(await apply("v3.yaml", upstream(two.address)));
    await waitForConvergence(cp, [dp], { atLeast: versions[2] });
    expect(await whoAnswered(`${dp.proxyUrl}/api/x`)).toBe("two");
    expect((await send(`${dp.proxyUrl}/v2/x`)).status).toBe(200);

    const listed = await clawctl("history", "-o", "json");
    expect(listed.code, listed.stderr).toBe(0);
    const items = (JSON.parse(listed.stdout) as { items: HistoryItem[] }).items;
    expect(items.map((item) => item.version)).toEqual([...versions].reverse());
    expect(items.every((item) => item.author === "alice")).toBe(true);
    expect(items[0]?.changes).toEqual([{ kind: "upstreams", name: "agents", action: "updated" }]);
    expect(items[1]?.changes).toEqual([{ kind: "routes", name: "v2", action: "created" }]);

    const table = await clawctl("history");
    expect(table.stdout).toMatch(/VERSION\s+TIME\s+AUTHOR\s+SUMMARY/);
    expect(table.stdout).toContain("routes/v2");
  });

  it("prints the config as it was at the first version, as a manifest", async () => {
    const run = await clawctl("history", String(versions[0]));
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`address: ${one.address}`);
    expect(run.stdout).not.toContain(two.address);
    expect(run.stdout).toContain("name: api");
    expect(run.stdout).not.toContain("name: v2");
  });

  it("rolls back to the first version: the data plane serves it, and history grows", async () => {
    const [v1, , v3] = versions as [number, number, number];
    const run = await clawctl("rollback", String(v1));
    expect(run.code, run.stderr).toBe(0);
    const revision = Number(/config revision (\d+)/.exec(run.stdout)?.[1]);
    expect(revision).toBeGreaterThan(v3);
    expect(run.stdout).toContain("routes/v2 deleted");
    // `from` is the config version the rollback replaced, not the store's raw revision.
    expect(run.stdout).toContain(`rolled back from version ${v3} to version ${v1}`);

    await waitForConvergence(cp, [dp], { atLeast: revision });
    expect(await whoAnswered(`${dp.proxyUrl}/api/x`)).toBe("one");
    expect((await send(`${dp.proxyUrl}/v2/x`)).status).toBe(404);

    const items = (
      JSON.parse((await clawctl("history", "-o", "json")).stdout) as {
        items: HistoryItem[];
      }
    ).items;
    expect(items).toHaveLength(4);
    expect(items[0]).toMatchObject({
      version: revision,
      author: "alice",
      rollback: { from: v3, to: v1 },
    });
    const events = await cp.admin.call<{ items: { token: string; rollback?: unknown }[] }>(
      "GET",
      "/v1/events?type=config&limit=1",
    );
    expect(events.body.items[0]).toMatchObject({ token: "alice", rollback: { to: v1 } });
  });

  it("says nothing changed when the config already is that version's, though etcd moved on", async () => {
    const [v1] = versions as [number];
    // A write outside Clawgate's keys moves etcd's revision past the config's.
    const put = await fetch(`${etcd.endpoint}/v3/kv/put`, {
      method: "POST",
      body: JSON.stringify({
        key: Buffer.from("/elsewhere/key").toString("base64"),
        value: Buffer.from("x").toString("base64"),
      }),
    });
    expect(put.status).toBe(200);
    const before = (await clawctl("history", "-o", "json")).stdout;
    const run = await clawctl("rollback", String(v1));
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(`config already as at version ${v1}; nothing changed\n`);
    expect((await clawctl("history", "-o", "json")).stdout).toBe(before);
  });

  it("refuses a version that was never a config version, saying so", async () => {
    const run = await clawctl("rollback", "999999");
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain("version 999999 is not a config version");
    const bad = await clawctl("rollback", "latest");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("version must be a positive integer");
  });
});
