import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  type NamedUpstream,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  tally,
  waitFor,
  waitForConvergence,
  whoAnswered,
} from "./support/index.js";

// One story, step by step: each `it` builds on the state the one before left, so they run in
// order in one describe and share the processes.
describe("walking skeleton: etcd, one control plane, two data planes, three upstreams", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dataPlanes: DataPlane[];
  const upstreams: Record<string, NamedUpstream> = {};

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    for (const name of ["a", "b", "c"]) {
      const upstream = await startNamedUpstream(name);
      teardown.add(`upstream ${name}`, () => upstream.close());
      upstreams[name] = upstream;
    }
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    const first = cp;
    teardown.add("control plane", () => first.stop());

    await cp.admin.putUpstream("agents", {
      nodes: [
        { address: upstreams.a!.address, weight: 3 },
        { address: upstreams.b!.address, weight: 1 },
      ],
    });
    await cp.admin.putUpstream("other", { nodes: [{ address: upstreams.c!.address, weight: 1 }] });
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "agents" });
    await cp.admin.putRoute("other", { match: { pathPrefix: "/other" }, upstream: "other" });

    dataPlanes = [];
    for (const nodeId of ["dp-1", "dp-2"]) {
      const dp = await startDataPlane({
        CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
        CLAWGATE_NODE_ID: nodeId,
      });
      teardown.add(nodeId, () => dp.stop());
      dataPlanes.push(dp);
    }
  });

  afterAll(() => teardown.run());

  it("both data planes become ready and serve both routes", async () => {
    for (const dp of dataPlanes) {
      expect(await dp.readyStatus()).toBe(200);
      expect(["a", "b"]).toContain(await whoAnswered(`${dp.proxyUrl}/api/hello`));
      expect(await whoAnswered(`${dp.proxyUrl}/other/hello`)).toBe("c");
    }
  });

  it("splits 400 sequential requests 300 to a and 100 to b (weights 3 and 1)", async () => {
    const counts = await tally(`${dataPlanes[0]!.proxyUrl}/api/x`, 400);
    expect(counts).toEqual({ a: 300, b: 100 });
  });

  it("both data planes apply the CP's snapshot version and show SYNCED", async () => {
    const version = await waitForConvergence(cp, dataPlanes);
    const snapshot = await cp.admin.snapshot();
    expect(snapshot).toMatchObject({ version, published: true });
    for (const dp of dataPlanes) expect(await dp.snapshotVersion()).toBe(version);
    const fleet = await cp.admin.dataplanes();
    for (const dp of dataPlanes) {
      expect(fleet.find((item) => item.nodeId === dp.nodeId)).toMatchObject({
        state: "SYNCED",
        appliedVersion: version,
      });
    }
  });

  it("keeps serving from both data planes after the control plane is killed with SIGKILL", async () => {
    const versionBefore = await dataPlanes[0]!.snapshotVersion();
    await cp.kill();
    expect(cp.process.exitStatus?.signal).toBe("SIGKILL");
    for (const dp of dataPlanes) {
      expect(await tally(`${dp.proxyUrl}/api/x`, 40)).toEqual({ a: 30, b: 10 });
      expect(await whoAnswered(`${dp.proxyUrl}/other/x`)).toBe("c");
      // A CP outage is not the data plane's fault: it stays ready on its last snapshot.
      expect(await dp.readyStatus()).toBe(200);
      expect(await dp.snapshotVersion()).toBe(versionBefore);
    }
  });

  it("reconnects both data planes to a new control plane on the same etcd and ports", async () => {
    const pids = dataPlanes.map((dp) => dp.process.pid);
    cp = await startControlPlane(cp.env, { name: "control-plane-2" });
    const second = cp;
    teardown.add("restarted control plane", () => second.stop());
    await waitForConvergence(cp, dataPlanes, { timeoutMs: 30_000 });

    // A change made after the restart must reach both, over the new streams.
    const before = (await cp.admin.snapshot()).version;
    const write = await cp.admin.putRoute("fresh", {
      match: { pathPrefix: "/fresh" },
      upstream: "other",
    });
    const version = await waitForConvergence(cp, dataPlanes, {
      atLeast: write.revision ?? before + 1,
    });
    for (const dp of dataPlanes) {
      await waitFor(
        async () => (await whoAnswered(`${dp.proxyUrl}/fresh/x`).catch(() => false)) === "c",
        { what: `${dp.nodeId} to route /fresh to c (version ${version})` },
      );
      expect(await dp.snapshotVersion()).toBe(version);
    }
    // Nobody restarted the data planes: the same processes did all of this.
    expect(dataPlanes.map((dp) => dp.process.pid)).toEqual(pids);
    expect(dataPlanes.every((dp) => dp.process.running)).toBe(true);
  });
});
