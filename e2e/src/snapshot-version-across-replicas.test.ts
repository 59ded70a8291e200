import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  freePorts,
  metricSum,
  metricValue,
  putEtcdKey,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "./support/index.js";

async function controlPlaneSends(cp: ControlPlane, kind: "full" | "delta"): Promise<number> {
  const response = await fetch(`${cp.adminUrl}/metrics`, {
    headers: { authorization: `Bearer ${cp.token}` },
    signal: AbortSignal.timeout(10_000),
  });
  return metricSum(await response.text(), "clawgate_snapshot_sends_total", { kind });
}

/**
 * DESIGN "Snapshots": a snapshot's version is an etcd revision, so every replica agrees on it.
 * Writes under the prefix that are not config (the replicas' shared records, other writers'
 * keys) must not move it: a replica started after them numbers the config as the one that
 * watched it being written, and a data plane that moves from one to the other keeps its version
 * (nothing is sent), then takes the next change as a delta.
 */
describe("one config, one version, on every control-plane replica", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let env: Record<string, string>;
  /** cp-2's gRPC address, chosen up front: the data plane lists it before cp-2 runs. */
  let secondGrpc: string;
  let first: ControlPlane;
  let second: ControlPlane;
  let dp: DataPlane;
  let version: number;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    // A short lease, so a stopped replica's shared records go soon.
    env = { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_LEADER_TTL_SECONDS: "2" };
    first = await startControlPlane({ ...env, CLAWGATE_INSTANCE_ID: "cp-1" }, { name: "cp-1" });
    teardown.add("cp-1", () => first.stop());
    secondGrpc = `127.0.0.1:${(await freePorts(1))[0]}`;
    await first.admin.putUpstream("agents", { nodes: [{ address: "127.0.0.1:9", weight: 1 }] });
  }, 60_000);
  afterAll(() => teardown.run());

  it("publishes the config under the revision of its write on both replicas, whatever was written after", async () => {
    const written = first.admin.lastConfigRevision;
    // cp-1 first: the data plane streams from it while it runs.
    dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: `${first.grpcAddress},${secondGrpc}`,
      CLAWGATE_NODE_ID: "dp-1",
    });
    teardown.add("dp-1", () => dp.stop());
    version = await waitForConvergence(first, [dp], { atLeast: written });
    // cp-1 has written dp-1's shared record by now: not config, so not a version.
    expect(version).toBe(written);

    let other = 0;
    for (let i = 0; i < 3; i++) {
      other = await putEtcdKey(etcd.endpoint, `/clawgate/meta/other-writer/${i}`, "x");
    }
    expect(other).toBeGreaterThan(written);

    // Started after all of it, cp-2 reads the store at a later revision than the config's.
    second = await startControlPlane(
      { ...env, CLAWGATE_INSTANCE_ID: "cp-2", CLAWGATE_GRPC_LISTEN: secondGrpc },
      { name: "cp-2" },
    );
    teardown.add("cp-2", () => second.stop());
    expect(await second.admin.snapshot()).toMatchObject({ version: written, published: true });
    expect(await first.admin.snapshot()).toMatchObject({ version: written, published: true });
  }, 120_000);

  it("keeps a data plane's version when it moves to the other replica, and sends it the next change as a delta", async () => {
    const appliedAt = metricValue(
      await dp.metrics(),
      "clawgate_snapshot_applied_timestamp_seconds",
    );
    expect(await controlPlaneSends(second, "full")).toBe(0);

    await first.stop();
    const moved = await waitFor(
      async () => {
        const item = (await second.admin.dataplanes()).find((d) => d.nodeId === "dp-1");
        return item?.replica === "cp-2" && item.state === "SYNCED" ? item : undefined;
      },
      { what: "dp-1 to stream from cp-2, SYNCED", timeoutMs: 30_000 },
    );
    // Its Hello named the version cp-2 publishes too: nothing to send, nothing applied again.
    expect(moved.appliedVersion).toBe(version);
    expect(await dp.snapshotVersion()).toBe(version);
    expect(await controlPlaneSends(second, "full")).toBe(0);
    expect(metricValue(await dp.metrics(), "clawgate_snapshot_applied_timestamp_seconds")).toBe(
      appliedAt,
    );

    // The next change goes out as a delta on the version the data plane brought along.
    await second.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "agents" });
    const next = await waitForConvergence(second, [dp]);
    expect(next).toBe(second.admin.lastConfigRevision);
    expect(await controlPlaneSends(second, "delta")).toBe(1);
    expect(await controlPlaneSends(second, "full")).toBe(0);
  }, 120_000);
});
