import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answer, startScriptedUpstream } from "../request-healing/scripted-upstream.js";
import {
  type ControlPlane,
  type DataPlane,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";

// Issue 12: leases and fleet probes live in a data plane's primary, requests in its workers, so
// a data plane with workers > 1 refuses a tenant limit with a NACK naming it, and keeps serving
// its last good config, instead of letting the tenant through unlimited.
describe("a data plane with workers: 2 and a fleet-wide tenant limit", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;

  beforeAll(async () => {
    const upstream = await startScriptedUpstream(answer(200, "ok"));
    teardown.add("upstream", () => upstream.close());
    cp = await startControlPlane();
    teardown.add("control plane", () => cp.stop());
    const write = await cp.admin.apply([
      { kind: "upstream", name: "app", spec: { nodes: [{ address: upstream.address }] } },
      { kind: "tenant", name: "free", spec: { apiKeySha256: ["a".repeat(64)] } },
      { kind: "route", name: "app", spec: { match: { pathPrefix: "/" }, upstream: "app" } },
    ]);
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_WORKERS: "2" });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
  }, 60_000);

  afterAll(() => teardown.run(), 30_000);

  it("NACKs the tenant's limit with a reason naming it and workers, and keeps serving", async () => {
    const served = await dp.snapshotVersion();
    await cp.admin.put("tenants", "acme", {
      apiKeySha256: ["b".repeat(64)],
      requestsPerMinute: 20,
    });
    const nacked = await waitFor(
      async () => {
        const item = (await cp.admin.dataplanes()).find((d) => d.nodeId === dp.nodeId);
        return item?.state === "NACKED" ? item : false;
      },
      { what: "the data plane to NACK the tenant limit" },
    );
    const error = (nacked.lastNack as { error: string }).error;
    expect(error).toContain('tenant "acme"');
    expect(error).toContain("workers=2");
    expect(await dp.snapshotVersion()).toBe(served);
    const response = await fetch(`${dp.proxyUrl}/x`, { signal: AbortSignal.timeout(5_000) });
    expect(response.status).toBe(200);
  }, 60_000);
});
