import { readFileSync } from "node:fs";
import { type ClientHttp2Session, connect } from "node:http2";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StreamUpstream, startStreamUpstream } from "../long-streams/stream-upstream.js";
import {
  type ControlPlane,
  type DataPlane,
  freePorts,
  h2Request,
  httpsGet,
  type NamedUpstream,
  type NamedUpstreamReply,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitForConvergence,
} from "../support/index.js";
import { type H2Upstream, type H2UpstreamReply, startH2Upstream } from "./h2-upstream.js";

// HTTP/2 from clients on the data plane's TLS listener (ALPN h2, HTTP/1.1 on the same port for
// clients that do not offer it), proxied to an HTTP/1.1 upstream, a streaming one, and an
// upstream that asks for HTTP/2 (`http2: true`) over TLS. Real binaries, throwaway certificates.
describe("HTTP/2 on the proxy's TLS listener", () => {
  const teardown = new Teardown();
  let pki: TestPki;
  let ca: string;
  let cp: ControlPlane;
  let dp: DataPlane;
  let tlsPort: number;
  let plain: NamedUpstream;
  let streams: StreamUpstream;
  let h2: H2Upstream;
  let session: ClientHttp2Session;

  beforeAll(async () => {
    pki = await makeTestPki();
    teardown.add("test PKI", () => pki.remove());
    ca = readFileSync(pki.caCert, "utf8");
    plain = await startNamedUpstream("plain");
    teardown.add("upstream plain", () => plain.close());
    streams = await startStreamUpstream();
    teardown.add("stream upstream", () => streams.close());
    h2 = await startH2Upstream({ certFile: pki.serverCert, keyFile: pki.serverKey });
    teardown.add("h2 upstream", () => h2.close());

    cp = await startControlPlane({});
    teardown.add("control plane", () => cp.stop());
    [tlsPort] = (await freePorts(1)) as [number];
    dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_PROXY_TLS_LISTEN: `127.0.0.1:${tlsPort}`,
      CLAWGATE_PROXY_TLS_CERT_FILE: pki.serverCert,
      CLAWGATE_PROXY_TLS_KEY_FILE: pki.serverKey,
    });
    teardown.add("data plane", () => dp.stop());
    const rareProbes = { intervalMs: 3_600_000, path: "/healthz" };
    const applied = await cp.admin.apply([
      { kind: "upstream", name: "plain", spec: { nodes: [{ address: plain.address }] } },
      { kind: "upstream", name: "streams", spec: { nodes: [{ address: streams.address }] } },
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
      { kind: "route", name: "plain", spec: { match: { pathPrefix: "/api" }, upstream: "plain" } },
      {
        kind: "route",
        name: "streams",
        spec: { match: { pathPrefix: "/sse" }, upstream: "streams" },
      },
      { kind: "route", name: "h2", spec: { match: { pathPrefix: "/h2" }, upstream: "h2" } },
    ]);
    // Not an earlier version published before the apply: the one holding its resources.
    await waitForConvergence(cp, [dp], {
      atLeast: (applied.body as { revision: number }).revision,
    });
    session = connect(`https://127.0.0.1:${tlsPort}`, { ca, servername: "localhost" });
    teardown.add("h2 client", () => new Promise<void>((resolve) => session.close(resolve)));
  });

  afterAll(() => teardown.run());

  it("answers a GET over HTTP/2, :authority sent upstream as Host, no pseudo-header leaked", async () => {
    const reply = await h2Request(session, { ":path": "/api/hello?x=1", ":authority": "api.test" });
    expect(session.alpnProtocol).toBe("h2");
    expect(reply.headers[":status"]).toBe(200);
    expect(reply.headers["x-request-id"]).toBeDefined();
    const seen = JSON.parse(reply.body) as NamedUpstreamReply;
    expect(seen.upstream).toBe("plain");
    expect(seen.path).toBe("/api/hello?x=1");
    expect(seen.headers.host).toBe("api.test");
    expect(seen.headers["x-forwarded-proto"]).toBe("https");
    expect(Object.keys(seen.headers).filter((name) => name.startsWith(":"))).toEqual([]);
  });

  it("streams server-sent events over HTTP/2 as the upstream sends them", async () => {
    const reply = await h2Request(session, {
      ":path": "/sse/events?count=4&gapMs=50",
      accept: "text/event-stream",
    });
    expect(reply.headers[":status"]).toBe(200);
    expect(reply.headers["content-type"]).toBe("text/event-stream");
    expect(reply.body.match(/^data: event \d$/gm)).toEqual([
      "data: event 0",
      "data: event 1",
      "data: event 2",
      "data: event 3",
    ]);
  });

  it("serves HTTP/1.1 clients on the same port", async () => {
    const reply = await httpsGet(tlsPort, "/api/one", ca, "localhost");
    expect(reply.status).toBe(200);
    expect(reply.httpVersion).toBe("1.1");
    expect((JSON.parse(reply.body) as NamedUpstreamReply).upstream).toBe("plain");
  });

  it("speaks HTTP/2 to an upstream that asks for it, a request body included", async () => {
    const fromH1 = await httpsGet(tlsPort, "/h2/a", ca, "localhost");
    expect(fromH1.status).toBe(200);
    expect(JSON.parse(fromH1.body) as H2UpstreamReply).toMatchObject({
      httpVersion: "2.0",
      method: "GET",
      path: "/h2/a",
    });
    // An HTTP/2 request body has no Content-Length: it still reaches the upstream whole.
    const posted = await h2Request(
      session,
      { ":path": "/h2/b", ":method": "POST", "content-type": "text/plain" },
      "x".repeat(5_000),
    );
    expect(posted.headers[":status"]).toBe(200);
    expect(JSON.parse(posted.body) as H2UpstreamReply).toMatchObject({
      httpVersion: "2.0",
      method: "POST",
      bodyBytes: 5_000,
    });
  });
});
