import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  send,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitForConvergence,
} from "../support/index.js";
import { answer, type ScriptedUpstream, startScriptedUpstream } from "./scripted-upstream.js";

// Issue 8 item 15: a GET in flight on a node that dies got a 502 with the default route. One
// of two nodes here reads every request and then drops the connection, as a killed process
// does; its /healthz stays fine, so only the request layer can save the request.
describe("default retry policy on real processes: a reset GET goes to the other node", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;
  let dropper: ScriptedUpstream;
  let healthy: ScriptedUpstream;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    dropper = await startScriptedUpstream((req) => req.socket.destroy());
    healthy = await startScriptedUpstream(answer(200, "ok"));
    for (const upstream of [dropper, healthy]) teardown.add("upstream", () => upstream.close());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    const write = await cp.admin.apply([
      {
        kind: "upstream",
        name: "pair",
        spec: { nodes: [{ address: dropper.address }, { address: healthy.address }] },
      },
      // No retry settings: the defaults are what is under test.
      { kind: "route", name: "pair", spec: { match: { pathPrefix: "/pair" }, upstream: "pair" } },
    ]);
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
  });

  afterAll(() => teardown.run());

  it("answers every GET with 200 although half of the first attempts are reset", async () => {
    const droppedBefore = dropper.hits.length;
    for (let i = 0; i < 6; i++) {
      const reply = await send(`${dp.proxyUrl}/pair/item/${i}`);
      expect(reply.status, `GET ${i}: ${reply.text}`).toBe(200);
      expect(reply.text).toBe("ok");
    }
    // Round robin over two nodes sent some first attempts to the node that resets them.
    expect(dropper.hits.length - droppedBefore).toBeGreaterThan(0);
  });

  it("never sends a reset POST again: it answers 502 and the other node never sees it", async () => {
    let resetSeen = false;
    for (let i = 0; i < 4; i++) {
      const dropped = dropper.hits.length;
      const served = healthy.hits.length;
      const reply = await send(`${dp.proxyUrl}/pair/order`, { method: "POST", body: "{}" });
      if (reply.status === 200) {
        expect(dropper.hits.length, `POST ${i} answered by the healthy node`).toBe(dropped);
        continue;
      }
      resetSeen = true;
      expect(reply.status, reply.text).toBe(502);
      expect((reply.json as { error: { code: string } }).error.code).toBe(
        "CLAWGATE_UPSTREAM_RESET",
      );
      expect(dropper.hits.length).toBe(dropped + 1);
      expect(healthy.hits.length, `POST ${i} must not be sent twice`).toBe(served);
    }
    expect(resetSeen, "no POST met the resetting node").toBe(true);
  });
});
