import { readdir } from "node:fs/promises";
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
  waitFor,
  waitForConvergence,
} from "../support/index.js";

/**
 * The disk cache takes a delta as a delta (appended behind the whole snapshot, deltas.log),
 * and a data plane killed without a chance to flush anything, restarted while the control
 * plane is down, serves the version the last delta led to, routes added by deltas included.
 */
describe("last good snapshot on disk, written delta by delta", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let upstream: NamedUpstream;
  let dir: string;
  let dp: DataPlane;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    upstream = await startNamedUpstream("a");
    teardown.add("upstream a", () => upstream.close());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    const first = cp;
    teardown.add("control plane", () => first.stop());
    await cp.admin.putUpstream("agents", { nodes: [{ address: upstream.address, weight: 1 }] });
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "agents" });
    dir = await makeWorkDir("dp-cache-deltas");
    teardown.add("data plane work dir", () => removeWorkDir(dir));
  });

  afterAll(() => teardown.run());

  it("appends deltas, and a killed data plane restarts into the last one's version", async () => {
    dp = await startDataPlane(
      { CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_CACHE_FALLBACK_AFTER_MS: "500" },
      { cwd: dir },
    );
    const first = dp;
    teardown.add("data plane", () => first.stop());
    let version = await waitForConvergence(cp, [dp]);
    // The first snapshot is on disk whole; the changes below go on top of it.
    await cacheHolds(dp, version);
    for (const name of ["d1", "d2", "d3"]) {
      const write = await cp.admin.putRoute(name, {
        match: { pathPrefix: `/${name}` },
        upstream: "agents",
      });
      version = await waitForConvergence(cp, [dp], { atLeast: write.revision! });
    }
    // The removal publishes a version past the last put's: wait for that one, whatever the
    // DELETE answered.
    await cp.admin.delete("routes", "d2");
    version = await waitForConvergence(cp, [dp], { atLeast: version + 1 });
    await cacheHolds(dp, version);
    // The changes came as deltas and were appended: the log is there beside the whole file.
    const cacheDir = join(dir, "cache");
    expect((await readdir(cacheDir)).sort()).toEqual(["deltas.log", "snapshot.bin"]);
    const served = await dp.configDump();

    await cp.stop();
    await dp.process.kill();
    dp = await startDataPlane(dp.env, { cwd: dir, readyTimeoutMs: 15_000 });
    const restarted = dp;
    teardown.add("restarted data plane", () => restarted.stop());
    expect(metricValue(await dp.metrics(), "clawgate_snapshot_version")).toBe(version);
    expect(metricValue(await dp.metrics(), "clawgate_snapshot_from_cache")).toBe(1);
    // Exactly what was served before the kill.
    const dump = await dp.configDump();
    expect(dump).toMatchObject({ version, source: "cache" });
    expect((dump as { snapshot: unknown }).snapshot).toEqual(
      (served as { snapshot: unknown }).snapshot,
    );
    for (const [path, status] of [
      ["/d1/x", 200],
      ["/d3/x", 200],
      ["/d2/x", 404],
    ] as const) {
      expect((await fetch(`${dp.proxyUrl}${path}`)).status).toBe(status);
    }
  });
});

async function cacheHolds(dp: DataPlane, version: number): Promise<void> {
  await waitFor(
    async () => metricValue(await dp.metrics(), "clawgate_snapshot_cache_version") === version,
    { what: `the cache to hold version ${version}`, timeoutMs: 30_000 },
  );
}
