import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  freePort,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";

async function readyz(adminUrl: string): Promise<{ status: number; body: { reason?: string } }> {
  const response = await fetch(`${adminUrl}/readyz`, { signal: AbortSignal.timeout(2_000) });
  return { status: response.status, body: (await response.json()) as { reason?: string } };
}

describe("a control plane started before etcd", () => {
  const teardown = new Teardown();
  afterAll(() => teardown.run());

  it("waits, says why, stays alive, and serves once etcd is up", async () => {
    const etcdPort = await freePort();
    const endpoint = `http://127.0.0.1:${etcdPort}`;
    const cp: ControlPlane = await startControlPlane(
      { CLAWGATE_ETCD_ENDPOINTS: endpoint },
      { untilServing: false },
    );
    teardown.add("control plane", () => cp.stop());

    // Waiting: one short line per attempt, not ready with the reason, alive.
    const expected = `cannot reach etcd at ${endpoint}: ECONNREFUSED`;
    await waitFor(() => cp.process.output.grep(expected).length >= 2, {
      what: `two "${expected}" log lines`,
    });
    const waiting = await readyz(cp.adminUrl);
    expect(waiting.status).toBe(503);
    expect(waiting.body.reason).toContain(`cannot reach etcd at ${endpoint}`);
    expect((await fetch(`${cp.adminUrl}/healthz`)).status).toBe(200);
    expect(cp.process.output.text(200)).not.toContain("    at ");
    expect(cp.process.running).toBe(true);

    const etcd: EtcdProcess = await startEtcd({ clientPort: etcdPort });
    teardown.add("etcd", () => etcd.stop());
    const etcdUpAt = Date.now();
    const attempts = cp.process.output.grep(expected).length;

    await waitFor(
      async () => {
        cp.process.assertRunning();
        return (await readyz(cp.adminUrl)).status === 200;
      },
      { what: "/readyz 200 once etcd answers", timeoutMs: 30_000 },
    );
    // Reported, not asserted: the backoff caps the wait at 5 s plus the etcd client's own.
    console.log(
      `[etcd-comes-late] ${attempts} attempts logged while etcd was down; ready ${Date.now() - etcdUpAt} ms after etcd answered`,
    );
    const put = await cp.admin.putUpstream("agents", {
      nodes: [{ address: "127.0.0.1:9", weight: 1 }],
    });
    expect(put.status).toBe(201);
    const dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    expect(await waitForConvergence(cp, [dp])).toBeGreaterThan(0);
  });
});
