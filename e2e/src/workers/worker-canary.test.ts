import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rolloutIn, startRollout } from "../governance/rollout-steps.js";
import {
  type RolloutUpstreams,
  routeToBroken,
  routeToGood,
  startRolloutUpstreams,
} from "../governance/rollout-upstreams.js";
import {
  type ControlPlane,
  type DataPlane,
  FreshConnections,
  startControlPlane,
  startDataPlane,
  startWorkerDataPlane,
  Teardown,
  VersionWatch,
  waitForConvergence,
  whoAnswered,
} from "../support/index.js";

/**
 * Issues 10 and 13: a data plane with workers answers its requests in the workers, and its
 * primary sums their counts per version into the one OutcomeReport, so it can be a canary.
 * dp-a (workers: 2) is the canary (the first by node id), dp-b a single process.
 */
describe("a progressive rollout whose canary runs two workers", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dpA: DataPlane;
  let dpB: DataPlane;
  let upstreams: RolloutUpstreams;
  // A new connection per request, so both workers count.
  const client = new FreshConnections(teardown);
  const status = async (url: string): Promise<number> => (await client.send(url)).status;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    upstreams = await startRolloutUpstreams(teardown);
    const applied = await cp.admin.apply(routeToGood(upstreams));
    const revision = (applied.body as { revision: number }).revision;
    dpA = await startWorkerDataPlane(teardown, cp, {
      env: { CLAWGATE_NODE_ID: "dp-a" },
      atLeast: revision,
    });
    dpB = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_NODE_ID: "dp-b" });
    teardown.add("dp-b", () => dpB.stop());
    await waitForConvergence(cp, [dpA, dpB], { atLeast: revision, timeoutMs: 60_000 });
  }, 180_000);
  afterAll(() => teardown.run());

  it("rolls the canary back on the 5xx its workers answered; dp-b never gets the version", async () => {
    const watch = new VersionWatch(dpB);
    try {
      const bad = await startRollout(cp, dpA, routeToBroken(upstreams), 600);
      for (let i = 0; i < 20; i++) {
        expect(await status(`${dpA.proxyUrl}/api/x`)).toBeGreaterThanOrEqual(500);
      }
      // Without the workers' counts the canary reports nothing and bakes its 600 s.
      const rolledBack = await rolloutIn(cp, "rolled-back");
      expect(rolledBack).toMatchObject({ version: bad, canaries: ["dp-a"] });
      expect(rolledBack.reason).toMatch(/^canaries failing: canary 5xx ratio 1\.00/);
      expect(rolledBack.outcomes.canary.requests).toBeGreaterThanOrEqual(10);
      const restored = rolledBack.rollbackVersion as number;
      await waitForConvergence(cp, [dpA, dpB], { atLeast: restored, timeoutMs: 30_000 });
      // Both workers moved back: fresh connections reach each of them.
      for (let i = 0; i < 6; i++) expect(await status(`${dpA.proxyUrl}/api/x`)).toBe(200);
      expect(await whoAnswered(`${dpA.proxyUrl}/api/x`)).toBe("good");
      await watch.reached(restored);
      await watch.stop();
      expect(watch.seen.has(bad)).toBe(false);
    } finally {
      await watch.stop();
    }
  }, 120_000);
});
