import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  describeExit,
  metricValue,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";
import { type EchoUpstream, startEchoUpstream } from "./echo-upstream.js";
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
    const before = await dp.snapshotVersion();
    await cp.admin.putRoute("other", { match: { pathPrefix: "/other" }, upstream: "echo" });
    await waitFor(async () => ((await dp.snapshotVersion()) ?? 0) > (before ?? 0), {
      what: "the data plane to apply the new route",
    });
    ws.send("still there");
    expect((await ws.next()).payload.toString()).toBe("echo: still there");

    process.kill(dp.process.pid, "SIGTERM");
    // After the drain delay the client is told "going away" (1001) and the tunnel ends.
    const close = await ws.next();
    expect(close.opcode).toBe(0x8);
    expect(close.payload.readUInt16BE(0)).toBe(1001);
    await ws.closed;
    expect(describeExit(await dp.process.exited)).toBe("code 0");
    await waitFor(() => upstream.open === 0, { what: "the upstream side of the tunnel to close" });
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
