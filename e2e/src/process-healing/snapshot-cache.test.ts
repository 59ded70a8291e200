import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  makeWorkDir,
  metricValue,
  type NamedUpstream,
  removeWorkDir,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  tally,
  waitFor,
  waitForConvergence,
} from "../support/index.js";

const FALLBACK_MS = "500";

async function metric(dp: DataPlane, name: string, labels: Record<string, string> = {}) {
  return metricValue(await dp.metrics(), name, labels);
}

describe("last good snapshot on disk (etcd, control plane, data plane)", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  const upstreams: NamedUpstream[] = [];
  let dir: string;
  let dp: DataPlane;
  let cachedVersion: number;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    for (const name of ["a", "b"]) {
      const upstream = await startNamedUpstream(name);
      teardown.add(`upstream ${name}`, () => upstream.close());
      upstreams.push(upstream);
    }
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    const first = cp;
    teardown.add("control plane", () => first.stop());
    await cp.admin.putUpstream("agents", {
      nodes: [
        { address: upstreams[0]!.address, weight: 3 },
        { address: upstreams[1]!.address, weight: 1 },
      ],
    });
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "agents" });
    dir = await makeWorkDir("dp-cache");
    teardown.add("data plane work dir", () => removeWorkDir(dir));
  });

  afterAll(() => teardown.run());

  it("writes every applied snapshot to its cache", async () => {
    dp = await startDataPlane(
      { CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_CACHE_FALLBACK_AFTER_MS: FALLBACK_MS },
      { cwd: dir },
    );
    const first = dp;
    teardown.add("data plane", () => first.stop());
    cachedVersion = await waitForConvergence(cp, [dp]);
    await waitFor(
      async () => (await metric(dp, "clawgate_snapshot_cache_version")) === cachedVersion,
      {
        what: `the cache to hold version ${cachedVersion}`,
      },
    );
    expect(await metric(dp, "clawgate_snapshot_from_cache")).toBe(0);
    expect(await tally(`${dp.proxyUrl}/api/x`, 40)).toEqual({ a: 30, b: 10 });
  });

  it("restarted while the control plane is down, it serves the cached snapshot", async () => {
    await cp.stop();
    expect(describeStatus(await dp.process.stop())).toBe("code 0");
    dp = await startDataPlane(dp.env, { cwd: dir, readyTimeoutMs: 15_000 });
    const restarted = dp;
    teardown.add("restarted data plane", () => restarted.stop());

    // Same answers, same version, and it says where the snapshot came from.
    expect(await tally(`${dp.proxyUrl}/api/x`, 40)).toEqual({ a: 30, b: 10 });
    expect(await metric(dp, "clawgate_snapshot_version")).toBe(cachedVersion);
    expect(await metric(dp, "clawgate_snapshot_from_cache")).toBe(1);
    const readyz = await fetch(`${dp.adminUrl}/readyz`);
    expect(await readyz.json()).toEqual({
      status: "ready",
      version: cachedVersion,
      source: "cache",
    });
    expect(await dp.configDump()).toMatchObject({ version: cachedVersion, source: "cache" });
    expect(dp.process.output.grep("serving the cached snapshot")).toHaveLength(1);
  });

  it("reconnects with the cached version in its Hello, then takes the control plane's next snapshot", async () => {
    cp = await startControlPlane(cp.env, { name: "control-plane-2" });
    const second = cp;
    teardown.add("control plane 2", () => second.stop());
    // A version is the revision of the config's newest change: the control planes' own
    // bookkeeping (elections, journal) moved etcd's revision meanwhile, not the config. So the
    // restarted CP publishes the cached version itself, the Hello told it so, and nothing is
    // resent.
    const converged = await waitForConvergence(cp, [dp], { timeoutMs: 30_000 });
    expect(converged).toBe(cachedVersion);
    expect(dp.process.output.grep('"msg":"snapshot applied"')).toEqual([]);
    expect(await tally(`${dp.proxyUrl}/api/x`, 40)).toEqual({ a: 30, b: 10 });

    const write = await cp.admin.putRoute("fresh", {
      match: { pathPrefix: "/fresh" },
      upstream: "agents",
    });
    const version = await waitForConvergence(cp, [dp], {
      atLeast: write.revision ?? cachedVersion + 1,
    });
    expect(version).toBeGreaterThan(cachedVersion);
    expect(await metric(dp, "clawgate_snapshot_from_cache")).toBe(0);
    expect(await dp.configDump()).toMatchObject({ version, source: "control-plane" });
    await waitFor(async () => (await metric(dp, "clawgate_snapshot_cache_version")) === version, {
      what: `the cache to hold version ${version}`,
    });
  });

  it("ignores a corrupt cache file: stays up, not ready, says why, until a control plane answers", async () => {
    await cp.stop();
    const corruptDir = await makeWorkDir("dp-corrupt");
    teardown.add("corrupt work dir", () => removeWorkDir(corruptDir));
    const cacheDir = join(corruptDir, "cache");
    await mkdir(cacheDir, { recursive: true });
    await writeFile(join(cacheDir, "snapshot.bin"), Buffer.alloc(512, 0x5a));

    const broken = await startDataPlane(
      {
        CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
        CLAWGATE_CACHE_DIR: cacheDir,
        CLAWGATE_CACHE_FALLBACK_AFTER_MS: "200",
      },
      { cwd: corruptDir, waitUntil: "healthz" },
    );
    teardown.add("data plane with a corrupt cache", () => broken.stop());
    await waitFor(
      async () =>
        (await metric(broken, "clawgate_snapshot_cache_errors_total", { kind: "load-corrupt" })) ===
        1,
      { what: "the corrupt cache to be counted" },
    );
    expect(broken.process.output.grep("ignoring the snapshot cache")).toHaveLength(1);
    expect(broken.process.output.grep("not a snapshot cache file")).toHaveLength(1);
    expect(broken.process.running).toBe(true);
    expect(await broken.readyStatus()).toBe(503);

    cp = await startControlPlane(cp.env, { name: "control-plane-3" });
    const third = cp;
    teardown.add("control plane 3", () => third.stop());
    const version = await waitForConvergence(cp, [broken], { timeoutMs: 30_000 });
    expect(await broken.readyStatus()).toBe(200);
    // The bad file is replaced by a good one.
    await waitFor(
      async () => (await metric(broken, "clawgate_snapshot_cache_version")) === version,
      {
        what: "the cache to be rewritten",
      },
    );
  });
});

function describeStatus(status: { code: number | null; signal: string | null }): string {
  return status.signal !== null ? `signal ${status.signal}` : `code ${status.code}`;
}
