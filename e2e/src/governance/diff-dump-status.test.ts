import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  makeWorkDir,
  removeWorkDir,
  runClawctl,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitForConvergence,
} from "../support/index.js";

// A manifest as people write it: most fields left to their defaults.
const MANIFEST = `
kind: upstream
name: agents
spec:
  nodes:
    - address: 127.0.0.1:9001
      weight: 3
---
kind: route
name: api
spec:
  match: { pathPrefix: /api }
  upstream: agents
`;

// Steps build on each other (apply, then diff, then dump), so they share one story.
describe("clawctl diff, dump, get all and status against a real etcd", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;
  let dir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    dir = await makeWorkDir("diff");
    teardown.add("work dir", () => removeWorkDir(dir));
    env = { CLAWGATE_ADMIN_URL: cp.adminUrl, CLAWGATE_ADMIN_TOKEN: cp.token };
    await writeFile(join(dir, "config.yaml"), MANIFEST);
  });
  afterAll(() => teardown.run());

  const clawctl = (...args: string[]) => runClawctl(args, env, { cwd: dir });

  it("diff exits 1 and lists every field of resources apply would create", async () => {
    const run = await clawctl("diff", "-f", "config.yaml");
    expect(run.code, run.stderr).toBe(1);
    expect(run.stdout).toContain("+ upstreams/agents (created)");
    expect(run.stdout).toContain('    + nodes.0.address: "127.0.0.1:9001"');
    expect(run.stdout).toContain("+ routes/api (created)");
    // Not a terminal: no colour codes.
    expect(run.stdout).not.toContain("\u001b[");
  });

  it("diff exits 0 and prints nothing once the manifest is applied, defaults and all", async () => {
    const apply = await clawctl("apply", "-f", "config.yaml");
    expect(apply.code, apply.stderr).toBe(0);
    const run = await clawctl("diff", "-f", "config.yaml");
    expect(run).toEqual({ code: 0, stdout: "", stderr: "" });
  });

  it("diff names each changed field, and exits 2 on a bad manifest or an unreachable API", async () => {
    await writeFile(
      join(dir, "changed.yaml"),
      MANIFEST.replace("/api", "/v2").replace("weight: 3", "weight: 5"),
    );
    const changed = await clawctl("diff", "-f", "changed.yaml");
    expect(changed.code).toBe(1);
    expect(changed.stdout).toBe(
      [
        "~ upstreams/agents",
        "    ~ nodes.0.weight: 3 -> 5",
        "~ routes/api",
        '    ~ match.pathPrefix: "/api" -> "/v2"',
        "",
      ].join("\n"),
    );

    await writeFile(join(dir, "bad.yaml"), MANIFEST.replace("weight: 3", "weight: 0"));
    const bad = await clawctl("diff", "-f", "bad.yaml");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("upstreams/agents nodes.0.weight");

    const missing = await clawctl("diff", "-f", "no-such-file.yaml");
    expect(missing.code).toBe(2);
    const down = await runClawctl(
      ["diff", "-f", "config.yaml"],
      {
        ...env,
        CLAWGATE_ADMIN_URL: "http://127.0.0.1:1",
      },
      { cwd: dir },
    );
    expect(down.code).toBe(2);
    expect(down.stderr).toContain("cannot reach the admin API");
  });

  it("dump writes a manifest that apply takes back unchanged and diff --prune finds equal", async () => {
    await cp.admin.put("breakers", "gentle", { cooldownMs: 60_000 });
    await cp.admin.put("tenants", "acme", { requestsPerMinute: 60 });
    // Every resource's revision: an apply that changes nothing leaves each one where it was.
    const revisions = async () => JSON.parse((await clawctl("get", "all", "-o", "json")).stdout);
    const before = await revisions();
    const dump = await clawctl("dump");
    expect(dump.code, dump.stderr).toBe(0);
    for (const id of ["breaker", "upstream", "route", "tenant"]) {
      expect(dump.stdout).toContain(`kind: ${id}\n`);
    }
    await writeFile(join(dir, "dump.yaml"), dump.stdout);

    const apply = await clawctl("apply", "-f", "dump.yaml", "--prune");
    expect(apply.code, apply.stderr).toBe(0);
    const lines = apply.stdout.trim().split("\n");
    expect(lines.filter((line) => !line.startsWith("config revision"))).toEqual([
      "breakers/gentle unchanged",
      "upstreams/agents unchanged",
      "routes/api unchanged",
      "tenants/acme unchanged",
    ]);
    expect(await revisions()).toEqual(before);
    const diff = await clawctl("diff", "-f", "dump.yaml", "--prune");
    expect(diff).toEqual({ code: 0, stdout: "", stderr: "" });
  });

  it("get all lists every kind", async () => {
    const run = await clawctl("get", "all");
    expect(run.code, run.stderr).toBe(0);
    for (const heading of ["UPSTREAMS", "ROUTES", "BREAKERS", "TENANTS"]) {
      expect(run.stdout).toContain(`${heading}\n`);
    }
    expect(run.stdout).toMatch(/^api\s/m);
    expect(run.stdout).toMatch(/^acme\s/m);
  });

  it("status shows the published version and each data plane's applied version, state and lag", async () => {
    dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_NODE_ID: "dp-status",
    });
    teardown.add("data plane", () => dp.stop());
    const version = await waitForConvergence(cp, [dp]);
    const run = await clawctl("status");
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`PUBLISHED VERSION:  ${version}`);
    expect(run.stdout).toMatch(new RegExp(`^dp-status\\s+SYNCED\\s+${version}\\s+0\\s`, "m"));
    expect(run.stdout).toContain("NODES EVICTED OR QUARANTINED (fleet-wide)\n  none");
    const json = JSON.parse((await clawctl("status", "-o", "json")).stdout);
    expect(json.dataPlanes).toEqual([
      expect.objectContaining({ nodeId: "dp-status", appliedVersion: version, lag: 0 }),
    ]);
  });
});
