import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rolloutIn, startRollout } from "../governance/rollout-steps.js";
import {
  answer,
  type ScriptedUpstream,
  startScriptedUpstream,
} from "../request-healing/scripted-upstream.js";
import {
  type ControlPlane,
  type DataPlane,
  type NamedUpstream,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
  waitForConvergence,
  waitForWorkers,
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
  let good: NamedUpstream;
  let broken: ScriptedUpstream;
  // A new connection per request: the cluster hands each to a worker in turn, so both count.
  const agent = new Agent({ pipelining: 0 });
  teardown.add("agent", () => agent.close());
  const status = async (url: string): Promise<number> => {
    const response = await request(url, {
      dispatcher: agent,
      reset: true,
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    await response.body.text();
    return response.statusCode;
  };

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    good = await startNamedUpstream("good");
    teardown.add("good upstream", () => good.close());
    broken = await startScriptedUpstream(answer(500, "broken"));
    teardown.add("broken upstream", () => broken.close());
    const applied = await cp.admin.apply([
      { kind: "upstream", name: "good", spec: { nodes: [{ address: good.address }] } },
      { kind: "route", name: "api", spec: { match: { pathPrefix: "/api" }, upstream: "good" } },
    ]);
    dpA = await startDataPlane(
      { CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_NODE_ID: "dp-a", CLAWGATE_WORKERS: "2" },
      { readyTimeoutMs: 60_000 },
    );
    teardown.add("dp-a", () => dpA.stop());
    dpB = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_NODE_ID: "dp-b" });
    teardown.add("dp-b", () => dpB.stop());
    await waitForConvergence(cp, [dpA, dpB], {
      atLeast: (applied.body as { revision: number }).revision,
      timeoutMs: 60_000,
    });
    await waitForWorkers(dpA, 2, "dp-a's two workers listening");
  }, 180_000);
  afterAll(() => teardown.run());

  it("rolls the canary back on the 5xx its workers answered; dp-b never gets the version", async () => {
    const seenByB = new Set<number | undefined>();
    let watching = true;
    const watch = (async () => {
      while (watching) seenByB.add(await dpB.snapshotVersion().catch(() => undefined));
    })();
    try {
      const bad = await startRollout(
        cp,
        dpA,
        [
          { kind: "upstream", name: "broken", spec: { nodes: [{ address: broken.address }] } },
          {
            kind: "route",
            name: "api",
            spec: { match: { pathPrefix: "/api" }, upstream: "broken" },
          },
        ],
        600,
      );
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
      await waitFor(() => [...seenByB].some((seen) => seen !== undefined && seen >= restored), {
        what: `the watch on dp-b to see version ${restored}`,
      });
      watching = false;
      await watch;
      expect(seenByB.has(bad)).toBe(false);
    } finally {
      watching = false;
      await watch;
    }
  }, 120_000);
});
