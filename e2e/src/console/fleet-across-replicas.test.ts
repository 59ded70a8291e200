import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  type LiveEvents,
  openLiveEvents,
  runClawctl,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";

interface DataPlaneData {
  nodeId: string;
  state: string;
  replica?: string;
}

/**
 * Issue 14 with two control-plane replicas, one data plane streaming from each: an SRE opening
 * either replica (GET /v1/dataplanes, clawctl status, the console's live feed) sees both data
 * planes and which replica each streams from; when a replica dies, its data plane stops showing
 * as connected on the other once the dead replica's lease expires.
 */
describe("every replica lists the whole fleet", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let first: ControlPlane;
  let second: ControlPlane;
  let dp1: DataPlane;
  let dp2: DataPlane;
  let live: LiveEvents;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    // A short lease: cp-1's records outlive its death by at most this.
    const env = { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_LEADER_TTL_SECONDS: "2" };
    first = await startControlPlane({ ...env, CLAWGATE_INSTANCE_ID: "cp-1" }, { name: "cp-1" });
    teardown.add("cp-1", () => first.stop());
    second = await startControlPlane({ ...env, CLAWGATE_INSTANCE_ID: "cp-2" }, { name: "cp-2" });
    teardown.add("cp-2", () => second.stop());
    await first.admin.putUpstream("agents", { nodes: [{ address: "127.0.0.1:9", weight: 1 }] });
  }, 60_000);
  afterAll(() => {
    live?.close();
    return teardown.run();
  });

  it("shows both data planes, with their replica, on either replica's API, live feed and clawctl status", async () => {
    // Opened before dp-1 connects to cp-1: its arrival must be pushed to cp-2's clients.
    live = await openLiveEvents(second.adminUrl, second.token);
    dp1 = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: first.grpcAddress,
      CLAWGATE_NODE_ID: "dp-1",
    });
    teardown.add("dp-1", () => dp1.stop());
    dp2 = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: second.grpcAddress,
      CLAWGATE_NODE_ID: "dp-2",
    });
    teardown.add("dp-2", () => dp2.stop());

    const pushed = await live.next("cp-2's live feed to carry dp-1 streaming from cp-1", (e) => {
      const plane = e.data as DataPlaneData;
      return e.type === "dataplane" && plane.nodeId === "dp-1" && plane.replica === "cp-1";
    });
    expect(pushed.data).toMatchObject({ connected: true });

    const atLeast = first.admin.lastConfigRevision;
    for (const cp of [first, second]) {
      // Every data plane SYNCED at the published version, as this replica lists them.
      const version = await waitForConvergence(cp, [dp1, dp2], { atLeast });
      expect(await cp.admin.dataplanes()).toMatchObject([
        { nodeId: "dp-1", state: "SYNCED", appliedVersion: version, replica: "cp-1" },
        { nodeId: "dp-2", state: "SYNCED", appliedVersion: version, replica: "cp-2" },
      ]);
      const env = { CLAWGATE_ADMIN_URL: cp.adminUrl, CLAWGATE_ADMIN_TOKEN: cp.token };
      const run = await runClawctl(["status"], env);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(
        new RegExp(`^dp-1\\s+SYNCED\\s+${version}\\s+0\\s.*\\scp-1\\s`, "m"),
      );
      expect(run.stdout).toMatch(
        new RegExp(`^dp-2\\s+SYNCED\\s+${version}\\s+0\\s.*\\scp-2\\s`, "m"),
      );
    }
  }, 90_000);

  it("stops showing a killed replica's data plane as connected once its lease expires", async () => {
    await first.kill();
    const gone = await waitFor(
      async () => {
        const dp = (await second.admin.dataplanes()).find((d) => d.nodeId === "dp-1");
        return dp?.state === "DISCONNECTED" ? dp : undefined;
      },
      { what: "cp-2 to show dp-1 disconnected", timeoutMs: 20_000 },
    );
    expect(gone.replica).toBeUndefined();
    expect(await second.admin.dataplanes()).toContainEqual(
      expect.objectContaining({ nodeId: "dp-2", state: "SYNCED", replica: "cp-2" }),
    );
  }, 30_000);
});
