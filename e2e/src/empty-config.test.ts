import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, describe, expect, it } from "vitest";
import {
  send,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitForConvergence,
} from "./support/index.js";

// A first-time user starts a control plane with no config and a data plane: the empty config
// is a valid snapshot, so the data plane becomes ready and answers 404, on either store.
describe.each(["embedded", "etcd"] as const)("an empty config on the %s store", (kind) => {
  const teardown = new Teardown();
  afterAll(() => teardown.run());

  it("is published at the store's revision; the data plane is ready and answers 404", async () => {
    const env: Record<string, string> = {};
    if (kind === "etcd") {
      const etcd: EtcdProcess = await startEtcd();
      teardown.add("etcd", () => etcd.stop());
      env.CLAWGATE_ETCD_ENDPOINTS = etcd.endpoint;
    }
    const cp = await startControlPlane(env);
    teardown.add("control plane", () => cp.stop());
    const dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());

    // Both stores start at revision 1, as a fresh etcd does; the control plane's own keys
    // (elections, health reports) may have moved it on since.
    const version = await waitForConvergence(cp, [dp]);
    expect(version).toBeGreaterThanOrEqual(1);
    expect(await cp.admin.snapshot()).toMatchObject({
      version,
      published: true,
      counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
    });
    expect(await dp.readyStatus()).toBe(200);
    const answer = await send(`${dp.proxyUrl}/anything`);
    expect(answer.status).toBe(404);
    expect(answer.json).toMatchObject({ error: { code: expect.any(String) } });
  });
});
