import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  FreshConnections,
  isRunning,
  killIfRunning,
  loggedAs,
  metricSum,
  startDataPlane,
  startWorkerGateway,
  Teardown,
  waitFor,
  waitForConvergence,
  waitForWorkers,
  workerPids,
} from "../support/index.js";

/**
 * Issue 10, worker robustness: a worker alive but hung (SIGSTOP: no JavaScript runs, the IPC
 * channel goes unread, as with a stuck event loop) must not hold an apply forever.
 */
describe("a data plane whose worker hangs", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  // The one connection handed to the hung worker is never answered.
  const client = new FreshConnections(teardown, 15_000);
  /** The upstream that answered, or the status or error code when none did. */
  const get = () => client.answeredBy(`${dp.proxyUrl}/api/x`);

  beforeAll(async () => {
    ({ cp, dp } = await startWorkerGateway(teardown, {
      upstreams: ["a", "b"],
      dataPlaneEnv: {
        // Waited out once, by the first test; 3 s (as in worker-cache-boot.test.ts) still leaves
        // the healthy worker, busy serving, ample time to answer, so it alone is killed.
        CLAWGATE_WORKER_APPLY_TIMEOUT_MS: "3000",
        // Pings would find the hang too (worker-pings.test.ts): here the apply's deadline must.
        CLAWGATE_WORKER_MAX_MISSED_PINGS: "1000",
        // The stop below waits this long for a hung worker's drain before it kills it.
        CLAWGATE_DRAIN_TIMEOUT_MS: "1000",
      },
    }));
  }, 180_000);

  afterAll(() => teardown.run());

  it("kills the hung worker, ACKs with the other, and the replacement serves the new version", async () => {
    const [victim] = workerPids(dp) as [number];
    teardown.add("stopped worker", () => killIfRunning(victim));
    process.kill(victim, "SIGSTOP");
    // Requests on two connections at a time from the moment the worker hangs until its
    // replacement serves: the other worker must answer them throughout.
    const answers: string[] = [];
    let running = true;
    const loops = [1, 2].map(async () => {
      while (running) answers.push(await get());
    });
    try {
      const write = await cp.admin.putRoute("api", {
        match: { pathPrefix: "/api" },
        upstream: "b",
      });
      // The apply waits 3 s for the hung worker's prepare, then goes on without it: an ACK.
      await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1, timeoutMs: 60_000 });
      const [hung] = loggedAs<{ pid: number; reason: string }>(
        dp,
        "proxy worker hung; killing it (SIGKILL) and starting another",
      );
      expect(hung).toMatchObject({ pid: victim, reason: "no answer to prepare within 3000 ms" });
      await waitFor(() => !isRunning(victim), { what: `hung worker ${victim} to be gone` });
      await waitForWorkers(dp, 2, "a replacement worker listening");
      const servedAt = answers.length;
      await waitFor(() => answers.length >= servedAt + 20, { what: "20 requests after" });
    } finally {
      running = false;
      await Promise.all(loops);
    }
    const failed = answers.filter((answer) => answer !== "a" && answer !== "b");
    // Only the one connection the cluster handed the hung worker before it was killed.
    expect(failed.length, `failures: ${failed.join(", ")}`).toBeLessThanOrEqual(1);
    expect(answers.length).toBeGreaterThan(20);
    const metrics = await dp.metrics();
    expect(metricSum(metrics, "clawgate_worker_restarts_total", { reason: "apply-timeout" })).toBe(
      1,
    );
    expect(metricSum(metrics, "clawgate_snapshot_nacks_total")).toBe(0);
    // No version mix: every fresh connection, on the surviving worker and the replacement,
    // meets the new route.
    const after: string[] = [];
    for (let i = 0; i < 12; i++) after.push(await get());
    expect(new Set(after)).toEqual(new Set(["b"]));
    expect(workerPids(dp)).toHaveLength(3);
  }, 180_000);

  it("on SIGTERM kills a worker hung past its drain, finishes its stop and exits 0", async () => {
    const live = workerPids(dp).slice(-2);
    const [hung] = live as [number];
    teardown.add("stopped worker on stop", () => killIfRunning(hung));
    process.kill(hung, "SIGSTOP");
    expect(await dp.process.stop(15_000)).toEqual({ code: 0, signal: null });
    expect(loggedAs(dp, "proxy worker did not stop after its drain; killing it (SIGKILL)")).toEqual(
      [expect.objectContaining({ pid: hung, drainTimeoutMs: 1000 })],
    );
    // The whole stop ran (snapshot stream, cache, pools closed), not the deadline's exit.
    expect(loggedAs(dp, "stopped")).toHaveLength(1);
    for (const pid of live) expect(isRunning(pid), `worker ${pid}`).toBe(false);
  });

  it("on a second SIGTERM exits at once and leaves no hung worker behind", async () => {
    const second = await startDataPlane(
      { CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_WORKERS: "2" },
      { readyTimeoutMs: 60_000 },
    );
    teardown.add("second data plane", () => second.stop());
    await waitForWorkers(second, 2, "the second data plane's two workers listening");
    const live = workerPids(second);
    const [hung] = live as [number];
    teardown.add("stopped worker on exit", () => killIfRunning(hung));
    process.kill(hung, "SIGSTOP");
    // The first waits on the hung worker's drain (10 s by default); the second cuts it short.
    process.kill(second.process.pid, "SIGTERM");
    await waitFor(() => loggedAs(second, "stopping: draining requests in flight").length > 0, {
      what: "the data plane to start stopping",
    });
    process.kill(second.process.pid, "SIGTERM");
    expect(await second.process.exited).toEqual({ code: 0, signal: null });
    expect(loggedAs(second, "second signal while stopping; exiting now")).toHaveLength(1);
    await waitFor(() => live.every((pid) => !isRunning(pid)), {
      what: `workers ${live.join(", ")} to be gone with their primary`,
    });
  }, 120_000);
});
