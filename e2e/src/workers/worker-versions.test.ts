import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  metricSum,
  metricValue,
  type NamedUpstream,
  type NamedUpstreamReply,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
  waitForConvergence,
  waitForWorkers,
  workerPids,
} from "../support/index.js";

// One story: each `it` builds on the state the one before left.
describe("versions and /metrics of a data plane with workers: 2", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;
  let a: NamedUpstream;
  let b: NamedUpstream;
  // A new connection per request: the cluster hands each to a live worker in turn, so a run of
  // them reaches both workers.
  const agent = new Agent({ pipelining: 0 });
  teardown.add("agent", () => agent.close());
  /** The upstream that answered each of `count` requests on fresh connections. */
  const answers = async (path: string, count: number): Promise<string[]> => {
    const seen: string[] = [];
    for (let i = 0; i < count; i++) {
      const response = await request(`${dp.proxyUrl}${path}`, {
        dispatcher: agent,
        reset: true,
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      const text = await response.body.text();
      seen.push(
        response.statusCode === 200
          ? (JSON.parse(text) as NamedUpstreamReply).upstream
          : String(response.statusCode),
      );
    }
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
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    a = await startNamedUpstream("a");
    teardown.add("upstream a", () => a.close());
    b = await startNamedUpstream("b");
    teardown.add("upstream b", () => b.close());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("a", { nodes: [{ address: a.address, weight: 1 }] });
    await cp.admin.putUpstream("b", { nodes: [{ address: b.address, weight: 1 }] });
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "a" });
    // Forking and loading two workers is slow on a busy machine.
    dp = await startDataPlane(
      {
        CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
        CLAWGATE_WORKERS: "2",
        // A worker is stopped (SIGSTOP) on purpose below, to scrape around it: not replaced.
        CLAWGATE_WORKER_MAX_MISSED_PINGS: "1000",
      },
      { readyTimeoutMs: 60_000 },
    );
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp]);
    await waitForWorkers(dp, 2);
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
