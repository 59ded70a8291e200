import { once } from "node:events";
import { readFileSync } from "node:fs";
import { type ClientHttp2Session, connect } from "node:http2";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type H2Upstream, startH2Upstream } from "../http2/h2-upstream.js";
import {
  type ControlPlane,
  freePorts,
  metricValue,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";
import { type EchoUpstream, startEchoUpstream } from "./echo-upstream.js";
import { expectTunnelClosedOnDrain, expectTunnelSurvivesReload } from "./tunnel-lifecycle.js";
import { openWs } from "./ws-client.js";
import { openWsOverH2 } from "./ws-h2-client.js";

// WebSocket over HTTP/2 (RFC 8441) on the data plane's TLS listener, and WebSocket to an
// upstream that asks for HTTP/2 (`http2: true`). Real binaries, throwaway certificates.
describe("WebSocket over HTTP/2 and to HTTP/2 upstreams", () => {
  const teardown = new Teardown();
  let pki: TestPki;
  let ca: string;
  let cp: ControlPlane;
  let echo: EchoUpstream;
  let h2: H2Upstream;
  let revision: number;

  beforeAll(async () => {
    pki = await makeTestPki();
    teardown.add("test PKI", () => pki.remove());
    ca = readFileSync(pki.caCert, "utf8");
    echo = await startEchoUpstream();
    teardown.add("echo upstream", () => echo.close());
    h2 = await startH2Upstream({ certFile: pki.serverCert, keyFile: pki.serverKey });
    teardown.add("h2 upstream", () => h2.close());
    cp = await startControlPlane({});
    teardown.add("control plane", () => cp.stop());
    const rareProbes = { intervalMs: 3_600_000, path: "/healthz" };
    const applied = await cp.admin.apply([
      { kind: "upstream", name: "echo", spec: { nodes: [{ address: echo.address }] } },
      {
        kind: "upstream",
        name: "h2",
        spec: {
          nodes: [{ address: h2.address }],
          tls: { caFile: pki.caCert },
          http2: true,
          healthCheck: rareProbes,
        },
      },
      // Limited to GET, as a route for WebSocket handshakes often is: an extended CONNECT is
      // the HTTP/2 form of that GET and must match it.
      {
        kind: "route",
        name: "ws",
        spec: { match: { pathPrefix: "/ws", methods: ["GET"] }, upstream: "echo" },
      },
      { kind: "route", name: "h2ws", spec: { match: { pathPrefix: "/h2ws" }, upstream: "h2" } },
    ]);
    revision = (applied.body as { revision: number }).revision;
  });

  afterAll(() => teardown.run());

  async function tlsDataPlane(name: string) {
    const [tlsPort] = (await freePorts(1)) as [number];
    const dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_PROXY_TLS_LISTEN: `127.0.0.1:${tlsPort}`,
      CLAWGATE_PROXY_TLS_CERT_FILE: pki.serverCert,
      CLAWGATE_PROXY_TLS_KEY_FILE: pki.serverKey,
      CLAWGATE_DRAIN_DELAY_MS: "200",
    });
    teardown.add(name, () => dp.stop());
    await waitForConvergence(cp, [dp], { atLeast: revision });
    const session = connect(`https://127.0.0.1:${tlsPort}`, { ca, servername: "localhost" });
    teardown.add(`${name} h2 client`, () => closeSession(session));
    await once(session, "remoteSettings");
    return { dp, session };
  }

  it("echoes over an extended CONNECT, is counted, survives a config change, closes on drain", async () => {
    const { dp, session } = await tlsDataPlane("data plane");
    expect(session.remoteSettings.enableConnectProtocol).toBe(true);

    const ws = await openWsOverH2(session, "/ws/chat");
    expect(ws.headers[":status"]).toBe(200);
    expect(ws.headers["x-request-id"]).toBeDefined();
    // Connection-specific fields of the node's 101 never reach an HTTP/2 client.
    expect(ws.headers["sec-websocket-accept"]).toBeUndefined();
    ws.send("hello");
    expect((await ws.next()).payload.toString()).toBe("echo: hello");
    expect(metricValue(await dp.metrics(), "clawgate_websocket_tunnels", { route: "ws" })).toBe(1);

    // The same connection carries a second tunnel beside the first.
    const second = await openWsOverH2(session, "/ws/other");
    second.send("two");
    expect((await second.next()).payload.toString()).toBe("echo: two");
    second.close();
    await second.closed;
    await waitFor(
      async () =>
        metricValue(await dp.metrics(), "clawgate_websocket_tunnels", { route: "ws" }) === 1,
      { what: "the second tunnel to be uncounted" },
    );

    await expectTunnelSurvivesReload(cp, dp, ws);
    await expectTunnelClosedOnDrain(dp, ws, echo);
  });

  it("answers an extended CONNECT no route matches with the catalog's 404 on its stream", async () => {
    const { session } = await tlsDataPlane("data plane 2");
    const ws = await openWsOverH2(session, "/nowhere");
    expect(ws.headers[":status"]).toBe(404);
    expect(JSON.parse(ws.body).error.code).toBe("CLAWGATE_ROUTE_NOT_FOUND");
    // The connection lives on: the refusal ended one stream, not the session.
    const ok = await openWsOverH2(session, "/ws/again");
    expect(ok.headers[":status"]).toBe(200);
    ok.close();
  });

  it("tunnels a WebSocket to an http2 upstream over HTTP/1.1, from HTTP/1.1 and HTTP/2 clients", async () => {
    const { dp, session } = await tlsDataPlane("data plane 3");
    const plain = await openWs(dp.proxyUrl, "/h2ws/chat");
    expect(plain.statusLine).toBe("HTTP/1.1 101 Switching Protocols");
    plain.send("via h1");
    expect((await plain.next()).payload.toString()).toBe("echo: via h1");
    const overH2 = await openWsOverH2(session, "/h2ws/chat");
    expect(overH2.headers[":status"]).toBe(200);
    overH2.send("via h2");
    expect((await overH2.next()).payload.toString()).toBe("echo: via h2");
    expect(h2.webSockets).toBe(2);
    const metrics = await dp.metrics();
    expect(metricValue(metrics, "clawgate_websocket_tunnels", { route: "h2ws" })).toBe(2);
    // The handshakes were successes to the breaker: it stays closed.
    expect(metricValue(metrics, "clawgate_breaker_state", { upstream: "h2" }) ?? 0).toBe(0);
    plain.socket.destroy();
    overH2.close();
    await waitFor(() => h2.webSockets === 0, { what: "the upstream tunnels to close" });
  });
});

/** Closes a client session; one the server already closed (a drained data plane) is done. */
function closeSession(session: ClientHttp2Session): Promise<void> {
  if (session.closed || session.destroyed) return Promise.resolve();
  return new Promise<void>((done) => session.close(done));
}
