import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scriptedModel } from "../fleet-quota/scripted-model.js";
import {
  type ScriptedUpstream,
  startScriptedUpstream,
} from "../request-healing/scripted-upstream.js";
import {
  type ControlPlane,
  type DataPlane,
  startControlPlane,
  startDataPlane,
  Teardown,
  tenantResource,
  waitForConvergence,
} from "../support/index.js";

const KEY = "replica-tenant-key-1";

// Issue 12, budgets across control-plane replicas: two control planes on one etcd, each with
// its own data plane, so no data plane shares a control plane's memory with the other. The
// replicas reserve blocks of the tenant's window from one count in etcd. The minute window is
// an hour long so the run cannot straddle two windows.
describe("a tenant budget shared by two control-plane replicas through etcd", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let a: DataPlane;
  let b: DataPlane;
  let upstream: ScriptedUpstream;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    upstream = await startScriptedUpstream(scriptedModel);
    teardown.add("upstream", () => upstream.close());
    const env = { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_QUOTA_MINUTE_MS: "3600000" };
    const replicas: ControlPlane[] = [];
    for (const name of ["cp-1", "cp-2"]) {
      const cp = await startControlPlane(env, { name });
      teardown.add(name, () => cp.stop());
      replicas.push(cp);
    }
    const [first, second] = replicas as [ControlPlane, ControlPlane];
    const write = await first.admin.apply([
      { kind: "upstream", name: "model", spec: { nodes: [{ address: upstream.address }] } },
      tenantResource("limited", KEY, { requestsPerMinute: 20 }),
      {
        kind: "route",
        name: "api",
        spec: { match: { pathPrefix: "/v1" }, upstream: "model", auth: { tenants: "required" } },
      },
    ]);
    // Each data plane streams from its own replica only.
    a = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: first.grpcAddress,
      CLAWGATE_NODE_ID: "dp-a",
    });
    teardown.add("dp-a", () => a.stop());
    b = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: second.grpcAddress,
      CLAWGATE_NODE_ID: "dp-b",
    });
    teardown.add("dp-b", () => b.stop());
    await waitForConvergence(first, [a], { atLeast: write.revision ?? 1 });
    await waitForConvergence(second, [b], { atLeast: write.revision ?? 1 });
  }, 60_000);

  afterAll(() => teardown.run(), 30_000);

  it("holds requestsPerMinute 20 across both replicas: 18-24 of 60 alternating requests pass, not 40", async () => {
    let admitted = 0;
    for (let i = 0; i < 60; i++) {
      const response = await fetch(`${(i % 2 === 0 ? a : b).proxyUrl}/v1/ping`, {
        headers: { authorization: `Bearer ${KEY}` },
        signal: AbortSignal.timeout(5_000),
      });
      await response.text();
      if (response.status === 200) admitted++;
      else expect(response.status).toBe(429);
    }
    expect(admitted).toBeGreaterThanOrEqual(18);
    expect(admitted).toBeLessThanOrEqual(24);
  }, 60_000);
});
