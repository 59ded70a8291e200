import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  isRunning,
  killIfRunning,
  loggedAs,
  metricSum,
  type NamedUpstream,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
  waitForConvergence,
  waitForWorkers,
  workerPids,
} from "../support/index.js";

/**
 * Issue 10, worker robustness: the systemd watchdog sees the first process only, so that
 * process pings its workers. A worker whose event loop is stuck in a synchronous loop (the
 * test hook behind CLAWGATE_TEST_BLOCK_ON_SIGUSR2_MS: SIGUSR2 spins for a minute) misses them
 * and is replaced, with no apply needed to find it.
 */
describe("a worker whose event loop stalls", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;
  let upstream: NamedUpstream;
  // A new connection per request: the cluster hands each to a worker free to take it.
  const agent = new Agent({ pipelining: 0 });
  teardown.add("agent", () => agent.close());
  const get = async (): Promise<number | string> => {
    try {
      const response = await request(`${dp.proxyUrl}/api/x`, {
        dispatcher: agent,
        reset: true,
        // The one connection handed to the stalled worker is never answered.
        headersTimeout: 15_000,
        bodyTimeout: 15_000,
      });
      await response.body.text();
      return response.statusCode;
    } catch (error) {
      return (error as Error & { code?: string }).code ?? (error as Error).message;
    }
  };

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    upstream = await startNamedUpstream("a");
    teardown.add("upstream", () => upstream.close());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("agents", { nodes: [{ address: upstream.address, weight: 1 }] });
    const write = await cp.admin.putRoute("api", {
      match: { pathPrefix: "/api" },
      upstream: "agents",
    });
    dp = await startDataPlane(
      {
        CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
        CLAWGATE_WORKERS: "2",
        CLAWGATE_WORKER_PING_INTERVAL_MS: "500",
        // 5 s: a worker merely starved of CPU on a loaded test machine is not found hung.
        CLAWGATE_WORKER_MAX_MISSED_PINGS: "10",
        CLAWGATE_TEST_BLOCK_ON_SIGUSR2_MS: "60000",
      },
      { readyTimeoutMs: 60_000 },
    );
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1, timeoutMs: 60_000 });
    await waitForWorkers(dp, 2);
  }, 180_000);

  afterAll(() => teardown.run());

  it("is killed after missing its pings and replaced, while the other worker serves", async () => {
    const [victim] = workerPids(dp) as [number];
    teardown.add("stalled worker", () => killIfRunning(victim));
    const statuses: (number | string)[] = [];
    let running = true;
    const loops = [1, 2].map(async () => {
      while (running) statuses.push(await get());
    });
    try {
      await waitFor(() => statuses.length >= 10, { what: "10 requests before the stall" });
      process.kill(victim, "SIGUSR2");
      const hung = await waitFor(
        () =>
          loggedAs<{ pid: number; reason: string }>(
            dp,
            "proxy worker hung; killing it (SIGKILL) and starting another",
          )[0],
        { what: "the primary to find the stalled worker hung", timeoutMs: 30_000 },
      );
      expect(hung).toMatchObject({ pid: victim, reason: "missed 10 pings in a row, 500 ms apart" });
      await waitFor(() => !isRunning(victim), { what: `stalled worker ${victim} to be gone` });
      await waitForWorkers(dp, 2, "a replacement worker listening");
      const replacedAt = statuses.length;
      await waitFor(() => statuses.length >= replacedAt + 20, { what: "20 requests after" });
    } finally {
      running = false;
      await Promise.all(loops);
    }
    // At most the requests the stalled worker held: the one in flight on each of the two
    // connections when it stalled, and the one connection the cluster handed it after.
    const failed = statuses.filter((status) => status !== 200);
    expect(failed.length, `failures: ${failed.join(", ")}`).toBeLessThanOrEqual(3);
    const metrics = await dp.metrics();
    expect(metricSum(metrics, "clawgate_worker_restarts_total", { reason: "missed-pings" })).toBe(
      1,
    );
    expect(metricSum(metrics, "clawgate_worker_restarts_total", { reason: "exited" })).toBe(0);
    expect(workerPids(dp)).toHaveLength(3);
  }, 180_000);
});
