import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  metricValue,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitForConvergence,
} from "../support/index.js";
import { type EchoUpstream, startEchoUpstream } from "./echo-upstream.js";
import { expectTunnelClosedOnDrain, expectTunnelSurvivesReload } from "./tunnel-lifecycle.js";
import { openWs } from "./ws-client.js";

describe("WebSocket tunnels through the data plane (etcd, control plane, data plane, upstream)", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let upstream: EchoUpstream;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    upstream = await startEchoUpstream();
    teardown.add("echo upstream", () => upstream.close());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("echo", { nodes: [{ address: upstream.address, weight: 1 }] });
    await cp.admin.putRoute("ws", { match: { pathPrefix: "/ws" }, upstream: "echo" });
  });

  afterAll(() => teardown.run());

  it("echoes through the gateway, is counted, survives a config change, and is closed on drain", async () => {
    const dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_DRAIN_DELAY_MS: "200",
    });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp]);

    const ws = await openWs(dp.proxyUrl, "/ws/chat");
    expect(ws.statusLine).toBe("HTTP/1.1 101 Switching Protocols");
    expect(ws.answer.toLowerCase()).toContain("sec-websocket-accept:");
    ws.send("hello");
    expect((await ws.next()).payload.toString()).toBe("echo: hello");
    expect(metricValue(await dp.metrics(), "clawgate_websocket_tunnels", { route: "ws" })).toBe(1);

    // Another route written: a new snapshot is applied while the tunnel is open.
    await expectTunnelSurvivesReload(cp, dp, ws);
    await expectTunnelClosedOnDrain(dp, ws, upstream);
  });

  it("a handshake no route matches gets 404 as HTTP/1.1, then the connection closes", async () => {
    const dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane 2", () => dp.stop());
    await waitForConvergence(cp, [dp]);
    const ws = await openWs(dp.proxyUrl, "/nowhere");
    expect(ws.statusLine).toMatch(/^HTTP\/1\.1 404 /);
    expect(ws.answer).toContain('"code":"CLAWGATE_ROUTE_NOT_FOUND"');
    await ws.closed;
  });
});
