import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  answer,
  type ScriptedUpstream,
  startScriptedUpstream,
} from "../request-healing/scripted-upstream.js";
import {
  type ControlPlane,
  type DataPlane,
  FreshConnections,
  startControlPlane,
  startWorkerDataPlane,
  Teardown,
  waitFor,
} from "../support/index.js";

interface HealthView {
  breakers?: { dataPlane: string; state: string; cooldownUntil?: string }[];
}

/**
 * Issue 14 with workers: a data plane running two workers keeps its breakers in the workers
 * (they answer the requests). An upstream answering 503 opens a worker's breaker; the primary
 * must report it on the snapshot stream, so the control plane shows it open.
 */
describe("a data plane with two workers reports its workers' breakers", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  let failing: ScriptedUpstream;
  const client = new FreshConnections(teardown);

  beforeAll(async () => {
    cp = await startControlPlane();
    teardown.add("control plane", () => cp.stop());
    failing = await startScriptedUpstream(answer(503, "unavailable"));
    teardown.add("failing upstream", () => failing.close());
    const applied = await cp.admin.apply([
      {
        kind: "breaker",
        name: "trip",
        // Opens after 4 requests half failed; a cooldown long enough to stay open while looked at.
        spec: { minRequests: 4, failureRatio: 0.5, cooldownMs: 120_000, maxCooldownMs: 120_000 },
      },
      {
        kind: "upstream",
        name: "failing",
        spec: { nodes: [{ address: failing.address }], breaker: "trip" },
      },
      {
        kind: "route",
        name: "failing",
        spec: { match: { pathPrefix: "/failing" }, upstream: "failing" },
      },
    ]);
    dp = await startWorkerDataPlane(teardown, cp, {
      env: { CLAWGATE_NODE_ID: "dp-w" },
      atLeast: (applied.body as { revision: number }).revision,
    });
  }, 120_000);
  afterAll(() => teardown.run());

  it("shows the breaker a worker opened in GET /v1/upstreams/{name}/health", async () => {
    const open = await waitFor(
      async () => {
        // One more 503 through some worker, then what the control plane was told.
        await client.send(`${dp.proxyUrl}/failing/x`);
        const { body } = await cp.admin.call<HealthView>("GET", "/v1/upstreams/failing/health");
        return body.breakers?.find((b) => b.dataPlane === "dp-w" && b.state === "open");
      },
      {
        what: "dp-w's open breaker of failing at the control plane",
        timeoutMs: 30_000,
        intervalMs: 100,
      },
    );
    expect(open.cooldownUntil).toBeDefined();
  }, 60_000);
});
