import { startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  killIfRunning,
  loggedAs,
  makeWorkDir,
  metricValue,
  removeWorkDir,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  tally,
  waitFor,
  waitForConvergence,
  waitForWorkers,
  workerPids,
} from "../support/index.js";

const HUNG = "proxy worker hung; killing it (SIGKILL) and starting another";

/**
 * Boot from the snapshot cache with workers: the primary compiles the cached snapshot, but the
 * workers answer the requests, so /readyz, READY=1 and "serving the cached snapshot" must wait
 * until they serve it too. A worker that hangs (SIGSTOP) holds that apply until its deadline.
 */
describe("a data plane with workers booting from its snapshot cache", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dir: string;
  let cachedVersion: number;

  beforeAll(async () => {
    const etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    const upstream = await startNamedUpstream("a");
    teardown.add("upstream a", () => upstream.close());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("a", { nodes: [{ address: upstream.address, weight: 1 }] });
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "a" });
    dir = await makeWorkDir("dp-workers-cache");
    teardown.add("data plane work dir", () => removeWorkDir(dir));
    // One run with the control plane up leaves its snapshot in the cache.
    const first = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress }, { cwd: dir });
    teardown.add("first data plane", () => first.stop());
    cachedVersion = await waitForConvergence(cp, [first]);
    await waitFor(
      async () =>
        metricValue(await first.metrics(), "clawgate_snapshot_cache_version") === cachedVersion,
      { what: `the cache to hold version ${cachedVersion}` },
    );
    await first.stop();
    await cp.stop();
  }, 120_000);

  afterAll(() => teardown.run());

  it("is ready only once every worker serves the cached snapshot", async () => {
    const dp: DataPlane = await startDataPlane(
      {
        CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
        CLAWGATE_WORKERS: "2",
        // Long enough for both workers to listen first, on a loaded machine too.
        CLAWGATE_CACHE_FALLBACK_AFTER_MS: "8000",
        CLAWGATE_WORKER_APPLY_TIMEOUT_MS: "3000",
        // Pings would find the hang too: here only the apply's deadline may.
        CLAWGATE_WORKER_MAX_MISSED_PINGS: "1000",
      },
      { cwd: dir, waitUntil: "healthz" },
    );
    teardown.add("data plane", () => dp.stop());
    await waitForWorkers(dp, 2);
    const [victim] = workerPids(dp) as [number];
    teardown.add("stopped worker", () => killIfRunning(victim));
    process.kill(victim, "SIGSTOP");
    expect(await dp.readyStatus()).toBe(503);

    await waitFor(
      async () => {
        dp.process.assertRunning();
        return (await dp.readyStatus()) === 200;
      },
      {
        what: "the data plane to serve the cached snapshot",
        timeoutMs: 60_000,
      },
    );
    // Not ready while the hung worker held the apply: only once it was dropped, and the other
    // worker committed the cached snapshot.
    expect(loggedAs(dp, HUNG)).toEqual([
      expect.objectContaining({ pid: victim, reason: "no answer to prepare within 3000 ms" }),
    ]);
    expect(loggedAs(dp, "no control plane answered; serving the cached snapshot")).toHaveLength(1);
    const readyz = await fetch(`${dp.adminUrl}/readyz`);
    expect(await readyz.json()).toEqual({
      status: "ready",
      version: cachedVersion,
      source: "cache",
    });
    await waitForWorkers(dp, 2, "a replacement worker listening");
    expect(await tally(`${dp.proxyUrl}/api/x`, 20)).toEqual({ a: 20 });
  }, 180_000);
});
