import { once } from "node:events";
import { Agent, request as httpRequest, type Server } from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STREAM_USAGE_BODY_LIMIT } from "../quota/stream-usage-request.js";
import { fixedProxyHandler, usageRouteSnapshot } from "../testing/fixed-proxy.js";
import { closeLoopbackServer, listenOnLoopback } from "../testing/loopback-server.js";
import { acceptHttp2 } from "../tls-listener/h2-request.js";
import { PoolRegistry } from "../upstream/pool-registry.js";

// A JSON body of unknown length that grows past the usage read's limit on an injectStreamUsage
// route is paused and left for the upstream request to read. When the client is answered
// without one (here the node refuses connections: 502), the rest must still be read and let
// go, or the client's HTTP/2 stream (and the exchange with the chunks read) stays open, and an
// HTTP/1.1 client can never finish its upload.
describe("a body past the usage read's limit, answered without an upstream request", () => {
  const pools = new PoolRegistry();
  let h2: http2.Http2Server;
  let h1: { server: Server; port: number };
  const body = () => {
    const pad = Buffer.alloc(3 * STREAM_USAGE_BODY_LIMIT, "x").toString();
    return Buffer.from(`{"stream":true,"pad":"${pad}"}`);
  };

  beforeAll(async () => {
    // A port that was just freed: connections to it are refused.
    const closed = await listenOnLoopback(() => {});
    const refused = closed.port;
    await closeLoopbackServer(closed.server);
    const handler = fixedProxyHandler(usageRouteSnapshot(`127.0.0.1:${refused}`), pools);
    h2 = http2.createServer(acceptHttp2(handler) as never);
    h2.listen(0, "127.0.0.1");
    await once(h2, "listening");
    h1 = await listenOnLoopback(handler);
  });

  afterAll(async () => {
    await closeLoopbackServer(h1.server);
    await new Promise((resolve) => h2.close(resolve));
    await pools.close();
  });

  it("reads the rest of an HTTP/2 body, so the stream closes after the 502", async () => {
    const client = http2.connect(`http://127.0.0.1:${(h2.address() as AddressInfo).port}`);
    try {
      const stream = client.request({
        ":method": "POST",
        ":path": "/v1/chat/completions",
        "content-type": "application/json",
      });
      stream.on("data", () => {});
      const response = once(stream, "response") as Promise<[http2.IncomingHttpHeaders]>;
      stream.end(body());
      const [headers] = await response;
      expect(headers[":status"]).toBe(502);
      // Without the drain the proxy never reads the rest: the stream stays open and this waits
      // until the test's timeout.
      await once(stream, "close");
      expect(stream.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    } finally {
      client.close();
    }
  });

  it("reads the rest of a chunked HTTP/1.1 body, so the connection serves the next request", async () => {
    // One connection: the second request is answered only once the first body was read out.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const send = (body: Buffer, headers: Record<string, string>) =>
        new Promise<number>((resolve, reject) => {
          const client = httpRequest(
            {
              host: "127.0.0.1",
              port: h1.port,
              path: "/v1/chat/completions",
              method: "POST",
              headers: { "content-type": "application/json", ...headers },
              agent,
            },
            (res) => {
              res.resume();
              res.once("end", () => resolve(res.statusCode ?? 0));
            },
          );
          client.once("error", reject);
          // In pieces, so a body without a length goes chunked.
          for (let at = 0; at < body.length; at += 64 * 1024) {
            client.write(body.subarray(at, at + 64 * 1024));
          }
          client.end();
        });
      expect(await send(body(), { "transfer-encoding": "chunked" })).toBe(502);
      // Without the drain the proxy never reads the rest of the first body, so it never reads
      // this request: it waits until the test's timeout.
      expect(await send(Buffer.from("{}"), { "content-length": "2" })).toBe(502);
    } finally {
      agent.destroy();
    }
  });
});
