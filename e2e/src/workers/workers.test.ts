import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  FreshConnections,
  isRunning,
  metricSum,
  startWorkerGateway,
  Teardown,
  waitFor,
  waitForConvergence,
  waitForWorkers,
  workerPids,
} from "../support/index.js";

// One story: each `it` builds on the state the one before left.
describe("a data plane with workers: 2", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  const client = new FreshConnections(teardown);
  const get = (url: string) => client.status(url);

  beforeAll(async () => {
    ({ cp, dp } = await startWorkerGateway(teardown));
  }, 180_000);

  afterAll(() => teardown.run());

  it("applies the control plane's version and shows two live workers on one /metrics", async () => {
    await waitForConvergence(cp, [dp]);
    await waitForWorkers(dp, 2);
    expect(workerPids(dp)).toHaveLength(2);
    // Each family once: the primary lists none of the workers' families a second time.
    const types = (await dp.metrics()).split("\n").filter((line) => line.startsWith("# TYPE "));
    expect(types.filter((line, i) => types.indexOf(line) !== i)).toEqual([]);
    expect(types).toContain("# TYPE clawgate_websocket_tunnels gauge");
  });

  it("counts every request once across workers", async () => {
    const before = metricSum(await dp.metrics(), "clawgate_requests_total");
    const statuses = [];
    for (let i = 0; i < 40; i++) statuses.push(await get(`${dp.proxyUrl}/api/x`));
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(metricSum(await dp.metrics(), "clawgate_requests_total")).toBe(before + 40);
  });

  it("no longer lists a removed route on /metrics, and keeps a kept route's counter", async () => {
    await cp.admin.putRoute("gone", { match: { pathPrefix: "/gone" }, upstream: "a" });
    await waitForConvergence(cp, [dp]);
    // Fresh connections: both workers take some, so both registries hold the route's series.
    for (let i = 0; i < 10; i++) expect(await get(`${dp.proxyUrl}/gone/x`)).toBe(200);
    const before = await dp.metrics();
    expect(metricSum(before, "clawgate_requests_total", { route: "gone" })).toBe(10);
    const kept = metricSum(before, "clawgate_requests_total", { route: "api" });
    expect(kept).toBeGreaterThan(0);

    await cp.admin.delete("routes", "gone");
    await waitForConvergence(cp, [dp]);
    // Each worker dropped the route's series on its swap: no family lists it any more.
    const after = await dp.metrics();
    expect(after).not.toContain('route="gone"');
    expect(metricSum(after, "clawgate_requests_total", { route: "api" })).toBe(kept);
  });

  it("replaces a killed worker while the other keeps serving", async () => {
    const [victim] = workerPids(dp);
    const statuses: (number | string)[] = [];
    let running = true;
    const loop = (async () => {
      while (running) statuses.push(await get(`${dp.proxyUrl}/api/x`));
    })();
    await waitFor(() => statuses.length >= 20, { what: "20 requests before the kill" });
    process.kill(victim!, "SIGKILL");
    const killedAt = statuses.length;
    // The replacement is forked, gets the current snapshot, listens, and takes its turn.
    await waitFor(() => workerPids(dp).length === 3, { what: "a third worker started" });
    await waitForWorkers(dp, 2, "clawgate_workers back to 2");
    const replacedAt = statuses.length;
    await waitFor(() => statuses.length >= replacedAt + 40, { what: "40 requests after" });
    running = false;
    await loop;
    // One request at a time: only the one in flight on the killed worker may fail.
    const failed = statuses.filter((s) => s !== 200);
    expect(failed.length, `failures: ${failed.join(", ")}`).toBeLessThanOrEqual(1);
    expect(statuses.length).toBeGreaterThan(killedAt + 40);
    expect(workerPids(dp)[2]).not.toBe(victim);
  });

  it("keeps counting a killed worker's requests in /metrics once it is replaced", async () => {
    const counted = async () => metricSum(await dp.metrics(), "clawgate_requests_total");
    // No request runs now: this scrape holds each live worker's count so far.
    const before = await counted();
    const [, victim] = workerPids(dp);
    process.kill(victim!, "SIGKILL");
    await waitFor(() => workerPids(dp).length === 4, { what: "a fourth worker started" });
    await waitForWorkers(dp, 2, "clawgate_workers back to 2");
    // Its share is still counted: a sum of the live workers' alone would drop, and Prometheus
    // would read a counter reset.
    expect(await counted()).toBe(before);
    for (let i = 0; i < 10; i++) expect(await get(`${dp.proxyUrl}/api/x`)).toBe(200);
    expect(await counted()).toBe(before + 10);
  });

  it("on SIGTERM drains every worker, then exits 0", async () => {
    const live = workerPids(dp).slice(1);
    expect(await dp.process.stop(15_000)).toEqual({ code: 0, signal: null });
    // The primary exits only after each worker has: none is left behind holding the port.
    for (const pid of live) expect(isRunning(pid), `worker ${pid}`).toBe(false);
  });
});
