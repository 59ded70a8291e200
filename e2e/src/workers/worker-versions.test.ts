import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  FreshConnections,
  metricSum,
  metricValue,
  type NamedUpstream,
  startWorkerGateway,
  Teardown,
  waitFor,
  waitForConvergence,
  waitForWorkers,
  workerPids,
} from "../support/index.js";

// One story: each `it` builds on the state the one before left.
describe("versions and /metrics of a data plane with workers: 2", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  let b: NamedUpstream;
  // A new connection per request, so a run of them reaches both workers.
  const client = new FreshConnections(teardown);
  /** The upstream that answered each of `count` requests on fresh connections. */
  const answers = async (path: string, count: number): Promise<string[]> => {
    const seen: string[] = [];
    for (let i = 0; i < count; i++) seen.push(await client.answeredBy(`${dp.proxyUrl}${path}`));
    return seen;
  };
  const controlPlaneSends = async (kind: "full" | "delta") => {
    const response = await fetch(`${cp.adminUrl}/metrics`, {
      headers: { authorization: `Bearer ${cp.token}` },
      signal: AbortSignal.timeout(10_000),
    });
    return metricSum(await response.text(), "clawgate_snapshot_sends_total", { kind });
  };
  const scrape = async () => {
    const response = await fetch(`${dp.adminUrl}/metrics`, { signal: AbortSignal.timeout(20_000) });
    return { status: response.status, text: await response.text() };
  };

  beforeAll(async () => {
    let upstreams: Record<string, NamedUpstream>;
    ({ cp, dp, upstreams } = await startWorkerGateway(teardown, {
      upstreams: ["a", "b"],
      // A worker is stopped (SIGSTOP) on purpose below, to scrape around it: not replaced.
      dataPlaneEnv: { CLAWGATE_WORKER_MAX_MISSED_PINGS: "1000" },
    }));
    b = upstreams.b!;
  }, 180_000);

  afterAll(() => teardown.run());

  it("takes each change as a delta, and every worker serves it once the version is ACKed", async () => {
    const fullBefore = await controlPlaneSends("full");
    const deltasBefore = await controlPlaneSends("delta");
    for (const upstream of ["b", "a", "b"]) {
      const write = await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream });
      await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
      // SYNCED means ACKed: from then on no connection, on either worker, meets the old route.
      expect(new Set(await answers("/api/x", 12))).toEqual(new Set([upstream]));
    }
    expect(await controlPlaneSends("delta")).toBe(deltasBefore + 3);
    expect(await controlPlaneSends("full")).toBe(fullBefore);
  });

  it("NACKs a version the workers refuse, with their reason, and every worker keeps the last good", async () => {
    const served = await dp.snapshotVersion();
    await cp.admin.putUpstream("b", {
      nodes: [{ address: b.address }],
      tls: { caFile: "/nonexistent/clawgate-ca.pem" },
    });
    const nack = await waitFor(
      async () => {
        const item = (await cp.admin.dataplanes()).find((d) => d.nodeId === dp.nodeId);
        return item?.state === "NACKED" ? item : false;
      },
      { what: "the data plane to NACK the unreadable CA file" },
    );
    const error = (nack.lastNack as { error: string }).error;
    expect(error).toMatch(/^worker \d+: /);
    expect(error).toContain("tls.caFile cannot read /nonexistent/clawgate-ca.pem");
    expect(await dp.snapshotVersion()).toBe(served);
    expect(new Set(await answers("/api/x", 12))).toEqual(new Set(["b"]));
    // Fixed, it travels again and every worker moves to it.
    const write = await cp.admin.putUpstream("b", { nodes: [{ address: b.address }] });
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
    expect(new Set(await answers("/api/x", 12))).toEqual(new Set(["b"]));
  });

  it("answers /metrics with the live workers' series while one does not answer", async () => {
    const [stopped] = workerPids(dp).slice(-2) as [number];
    process.kill(stopped, "SIGSTOP");
    try {
      const { status, text } = await scrape();
      expect(status, text).toBe(200);
      // The stopped worker is still alive and listening: the gauge counts it; the scrape
      // carries the other's request series and the primary's own.
      expect(metricValue(text, "clawgate_workers")).toBe(2);
      expect(metricSum(text, "clawgate_requests_total")).toBeGreaterThan(0);
      expect(metricValue(text, "clawgate_snapshot_version")).toBe(await dp.snapshotVersion());
    } finally {
      process.kill(stopped, "SIGCONT");
    }
  });

  it("answers /metrics while a replacement worker is still starting", async () => {
    const before = workerPids(dp).length;
    const [victim] = workerPids(dp).slice(-1) as [number];
    process.kill(victim, "SIGKILL");
    // Scraped as soon as the replacement process exists, before it can answer anything.
    await waitFor(() => workerPids(dp).length === before + 1, { what: "a replacement worker" });
    const { status, text } = await scrape();
    expect(status, text).toBe(200);
    expect(metricValue(text, "clawgate_workers")).toBeGreaterThanOrEqual(1);
    await waitForWorkers(dp, 2, "clawgate_workers back to 2");
  });
});
