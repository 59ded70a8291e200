import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type DataPlane,
  FreshConnections,
  isRunning,
  killIfRunning,
  loggedAs,
  metricSum,
  startWorkerGateway,
  Teardown,
  waitFor,
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
  let dp: DataPlane;
  // The one connection handed to the stalled worker is never answered.
  const client = new FreshConnections(teardown, 15_000);
  const get = () => client.status(`${dp.proxyUrl}/api/x`);

  beforeAll(async () => {
    ({ dp } = await startWorkerGateway(teardown, {
      dataPlaneEnv: {
        CLAWGATE_WORKER_PING_INTERVAL_MS: "500",
        // 5 s: a worker merely starved of CPU on a loaded test machine is not found hung.
        CLAWGATE_WORKER_MAX_MISSED_PINGS: "10",
        CLAWGATE_TEST_BLOCK_ON_SIGUSR2_MS: "60000",
      },
    }));
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
