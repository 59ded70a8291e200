import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  send,
  startControlPlane,
  startDataPlane,
  Teardown,
  VersionWatch,
  waitFor,
  waitForConvergence,
  whoAnswered,
} from "../support/index.js";
import {
  type RolloutUpstreams,
  routeToBroken,
  routeToGood,
  startRolloutUpstreams,
} from "./rollout-upstreams.js";

interface Rollout {
  state: "baking" | "promoted" | "rolled-back";
  version: number;
  canaries: string[];
  reason?: string;
  rollbackVersion?: number;
}

/**
 * Issue 13 with two control-plane replicas: the rollout is started on the leader (cp-1), while
 * both data planes stream from the other replica (cp-2). The leader must pick its canary among
 * data planes it has no stream with, judge the canary's outcomes that only cp-2 receives, and
 * cp-2 must hold dp-b on the base version from the moment it sees the rollout.
 */
describe("a progressive rollout whose data planes stream from a non-leader replica", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let leader: ControlPlane;
  let follower: ControlPlane;
  let dpA: DataPlane;
  let dpB: DataPlane;
  let upstreams: RolloutUpstreams;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    leader = await startControlPlane(
      { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_INSTANCE_ID: "cp-1" },
      { name: "cp-1" },
    );
    teardown.add("cp-1", () => leader.stop());
    // The first replica up wins the election; cp-2 starts only once it has.
    await waitFor(() => leader.process.output.grep("elected leader").length > 0, {
      what: "cp-1 to be elected leader",
      timeoutMs: 20_000,
    });
    follower = await startControlPlane(
      { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_INSTANCE_ID: "cp-2" },
      { name: "cp-2" },
    );
    teardown.add("cp-2", () => follower.stop());
    upstreams = await startRolloutUpstreams(teardown);
    const applied = await leader.admin.apply(routeToGood(upstreams));
    const env = { CLAWGATE_CP_ADDRESSES: follower.grpcAddress };
    dpA = await startDataPlane({ ...env, CLAWGATE_NODE_ID: "dp-a" });
    teardown.add("dp-a", () => dpA.stop());
    dpB = await startDataPlane({ ...env, CLAWGATE_NODE_ID: "dp-b" });
    teardown.add("dp-b", () => dpB.stop());
    await waitForConvergence(follower, [dpA, dpB], {
      atLeast: (applied.body as { revision: number }).revision,
    });
    // Both stream from cp-2; the leader lists them as cp-2's.
    await waitFor(
      async () => {
        const planes = await leader.admin.dataplanes();
        return planes.length === 2 && planes.every((dp) => dp.replica === "cp-2");
      },
      { what: "the leader to list both data planes as cp-2's" },
    );
  }, 90_000);
  afterAll(() => teardown.run());

  it("rolls the canary on cp-2 back on the leader's verdict; dp-b never gets the version", async () => {
    const watch = new VersionWatch(dpB);
    try {
      // Canaries are the first data planes by node id across the fleet: dp-a, on cp-2.
      const started = await leader.admin.call<{ revision: number }>("POST", "/v1/apply", {
        resources: routeToBroken(upstreams),
        rollout: { canary: 1, bakeSeconds: 600, maxErrorRatio: 0.05, minRequests: 10 },
      });
      expect(started.status).toBe(200);
      const bad = started.body.revision;
      const rollout = (await leader.admin.call<Rollout>("GET", "/v1/rollout")).body;
      expect(rollout).toMatchObject({ state: "baking", version: bad, canaries: ["dp-a"] });
      // Published at the revision the snapshot was built at, which other writes (the data
      // planes' shared records) may have moved past the apply's own.
      await waitFor(async () => ((await dpA.snapshotVersion()) ?? 0) >= bad, {
        what: `canary dp-a to apply version ${bad} from cp-2`,
        timeoutMs: 20_000,
      });
      for (let i = 0; i < 20; i++) {
        expect((await send(`${dpA.proxyUrl}/api/x`)).status).toBeGreaterThanOrEqual(500);
      }
      // Only cp-2 receives dp-a's outcomes; the leader judges them through etcd.
      const rolledBack = await waitFor(
        async () => {
          const current = (await leader.admin.call<Rollout>("GET", "/v1/rollout")).body;
          return current.state === "rolled-back" ? current : undefined;
        },
        { what: "the leader to roll the rollout back", timeoutMs: 30_000 },
      );
      expect(rolledBack.reason).toMatch(/^canaries failing: canary 5xx ratio 1\.00/);
      const restored = rolledBack.rollbackVersion as number;
      await waitForConvergence(follower, [dpA, dpB], { atLeast: restored });
      expect(await whoAnswered(`${dpA.proxyUrl}/api/x`)).toBe("good");
      await watch.reached(restored, 10_000);
      await watch.stop();
      // Nothing from the rolled-out version up to the rollback.
      const between = [...watch.seen].filter((v) => v !== undefined && v >= bad && v < restored);
      expect(between).toEqual([]);
    } finally {
      await watch.stop();
    }
  }, 120_000);
});
