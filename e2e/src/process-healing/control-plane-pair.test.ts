import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NodeHealthView, nodeHealth } from "../connection-healing/fleet-views.js";
import {
  type ControlPlane,
  type DataPlane,
  freePorts,
  type NamedUpstream,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";
import { type RequestWaves, startRequestWaves } from "./request-waves.js";

describe("two control planes on one etcd: losing one changes nothing for traffic", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let first: ControlPlane;
  let second: ControlPlane;
  let upstream: NamedUpstream;
  /** A node nobody listens on, so both data planes evict it and report that. */
  let deadNode: string;
  const dataPlanes: DataPlane[] = [];

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    upstream = await startNamedUpstream("a");
    teardown.add("upstream", () => upstream.close());
    first = await startControlPlane(
      { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_INSTANCE_ID: "cp-1" },
      { name: "cp-1" },
    );
    teardown.add("cp-1", () => first.stop());
    second = await startControlPlane(
      { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_INSTANCE_ID: "cp-2" },
      { name: "cp-2" },
    );
    teardown.add("cp-2", () => second.stop());
    await first.admin.putUpstream("agents", { nodes: [{ address: upstream.address, weight: 1 }] });
    await first.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "agents" });
    deadNode = `127.0.0.1:${(await freePorts(1))[0]}`;
    await first.admin.putUpstream("probed", {
      nodes: [{ address: deadNode, weight: 1 }],
      healthCheck: { intervalMs: 200, timeoutMs: 150, unhealthyThreshold: 2, healthyThreshold: 2 },
    });
    // Both list cp-1 first, so both are on cp-1 when it dies.
    for (const nodeId of ["dp-1", "dp-2"]) {
      const dp = await startDataPlane({
        CLAWGATE_CP_ADDRESSES: `${first.grpcAddress},${second.grpcAddress}`,
        CLAWGATE_NODE_ID: nodeId,
      });
      teardown.add(nodeId, () => dp.stop());
      dataPlanes.push(dp);
    }
  });

  afterAll(() => teardown.run());

  it("both replicas publish the same version (the etcd revision)", async () => {
    const version = await waitForConvergence(first, dataPlanes);
    expect((await second.admin.snapshot()).version).toBe(version);
    // Only cp-1 has streams so far: cp-2 lists both as streaming from cp-1.
    const listed = await waitFor(
      async () => {
        const planes = await second.admin.dataplanes();
        return planes.length === 2 && planes.every((dp) => dp.replica === "cp-1") && planes;
      },
      { what: "cp-2 to list both data planes as cp-1's" },
    );
    expect(listed.map((dp) => [dp.nodeId, dp.state])).toEqual([
      ["dp-1", "SYNCED"],
      ["dp-2", "SYNCED"],
    ]);
  });

  it("both replicas show the same node health, though only cp-1 has the streams", async () => {
    // cp-1 receives the reports and shares them through etcd; cp-2 reads them from there.
    const evictedByAll = (view: NodeHealthView | undefined) =>
      view?.evicted === dataPlanes.length && view.total === dataPlanes.length ? view : false;
    const onSecond = await waitFor(
      async () => evictedByAll(await nodeHealth(second.admin, "probed", deadNode)),
      { what: "cp-2 to show the dead node evicted by both data planes" },
    );
    const onFirst = await waitFor(
      async () => evictedByAll(await nodeHealth(first.admin, "probed", deadNode)),
      { what: "cp-1 to show the dead node evicted by both data planes" },
    );
    expect(onSecond.majority).toBe("evicted");
    expect(onSecond.reports.map((r) => r.dataPlane)).toEqual(["dp-1", "dp-2"]);
    expect(onSecond.reports).toEqual(onFirst.reports);
  });

  it("kill -9 of cp-1: every data plane is SYNCED on cp-2, with no failed request", async () => {
    const streams: RequestWaves[] = dataPlanes.map((dp) =>
      startRequestWaves(`${dp.proxyUrl}/api/x`, 8),
    );
    for (const stream of streams) teardown.add("request waves", () => stream.stop());
    await waitFor(() => streams.every((stream) => stream.completedWaves >= 5), {
      what: "traffic flowing through both data planes",
    });

    await first.kill();
    const version = await waitForConvergence(second, dataPlanes, { timeoutMs: 30_000 });
    const fleet = await second.admin.dataplanes();
    for (const dp of dataPlanes) {
      expect(fleet.find((item) => item.nodeId === dp.nodeId)).toMatchObject({
        state: "SYNCED",
        connected: true,
        appliedVersion: version,
      });
    }

    // A change made through the survivor reaches both data planes over their new streams.
    const write = await second.admin.putRoute("fresh", {
      match: { pathPrefix: "/fresh" },
      upstream: "agents",
    });
    await waitForConvergence(second, dataPlanes, { atLeast: write.revision ?? version + 1 });

    for (const stream of streams) await stream.stop();
    const all = streams.flatMap((stream) => stream.requests);
    expect(all.length).toBeGreaterThan(100);
    expect(all.filter((entry) => entry.status !== 200)).toEqual([]);
  });
});
