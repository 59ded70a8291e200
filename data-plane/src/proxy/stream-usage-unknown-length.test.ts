import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { type IncomingHttpHeaders, type IncomingMessage, request, type Server } from "node:http";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { STREAM_USAGE_BODY_LIMIT } from "../quota/stream-usage-request.js";
import { fixedProxyHandler, usageRouteSnapshot } from "../testing/fixed-proxy.js";
import { closeLoopbackServer, listenOnLoopback } from "../testing/loopback-server.js";
import { plainRequest } from "../testing/plain-request.js";
import { PoolRegistry } from "../upstream/pool-registry.js";

/** What the upstream got: its headers, its body's length and hash, the body itself if small. */
interface Received {
  headers: IncomingHttpHeaders;
  length: number;
  sha256: string;
  text: string;
}

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");
const USAGE_CHUNK = '"choices":[],"usage":{';

// Route usage.injectStreamUsage with request bodies of unknown length (chunked here; HTTP/2
// without content-length takes the same path, see e2e/src/tenants/stream-usage.test.ts): one
// that ends within the limit is rewritten like a declared one, a larger one streams on, scanned.
describe("include_usage for a request body of unknown length", () => {
  const received: Received[] = [];
  /** The upstream request of a body a client abandons: resolved when it closes. */
  const abandoned: { req: IncomingMessage; closed: Promise<void> }[] = [];
  let upstream: { server: Server; port: number };
  let proxy: { server: Server; port: number };
  const pools = new PoolRegistry();
  const registry = new Registry();
  let upstreamRequests = 0;

  beforeAll(async () => {
    // An OpenAI-style model: a content chunk, the usage chunk when asked, [DONE].
    upstream = await listenOnLoopback((req, res) => {
      upstreamRequests++;
      if (req.url === "/v1/abandoned") {
        // The proxy cuts this request short: node reports that as an "aborted" error.
        req.on("error", () => {});
        abandoned.push({ req, closed: new Promise((resolve) => req.once("close", resolve)) });
        req.resume();
        return;
      }
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        const text = body.length < 4096 ? body.toString() : "";
        received.push({ headers: req.headers, length: body.length, sha256: sha256(body), text });
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write('data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n');
        if (text.includes('"include_usage":true')) {
          res.write('data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}}\n\n');
        }
        res.end("data: [DONE]\n\n");
      });
    });
    proxy = await listenOnLoopback(
      fixedProxyHandler(usageRouteSnapshot(`127.0.0.1:${upstream.port}`), pools, {
        metrics: new ProxyMetrics(registry),
      }),
    );
  });

  afterAll(async () => {
    await closeLoopbackServer(proxy.server);
    await pools.close();
    await closeLoopbackServer(upstream.server);
  });

  /** Requests of route chat that ended with the client gone (499). */
  const clientGoneCount = async () => {
    const metric = (await registry.getMetricsAsJSON()).find(
      (m) => m.name === "clawgate_requests_total",
    );
    const values = (metric?.values ?? []) as { labels: Record<string, unknown>; value: number }[];
    return values.find((v) => v.labels.route === "chat" && v.labels.code === "499")?.value ?? 0;
  };

  /** A chunked POST: several writes and no content-length, so node:http frames it chunked. */
  const chunkedChat = (path: string, body: Buffer, chunkBytes: number) =>
    plainRequest(proxy.port, path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
      chunkBytes,
    });

  /** A chunked JSON POST left open, for a test to write to and leave; errors ignored. */
  const openChunkedChat = (path: string) => {
    const client = request({
      host: "127.0.0.1",
      port: proxy.port,
      path,
      method: "POST",
      headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
      agent: false,
    });
    client.on("error", () => {});
    return client;
  };

  it("adds include_usage to a chunked streaming request and sends it with a Content-Length", async () => {
    const body = Buffer.from(
      '{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}',
    );
    const reply = await chunkedChat("/v1/chat/completions", body, 10);
    expect(reply.status).toBe(200);
    const got = received.at(-1)!;
    expect(JSON.parse(got.text)).toEqual({
      ...JSON.parse(body.toString()),
      stream_options: { include_usage: true },
    });
    expect(got.headers["content-length"]).toBe(String(got.length));
    expect(got.headers["transfer-encoding"]).toBeUndefined();
    // The client did not ask for usage: it gets the stream without the usage chunk.
    expect(reply.body.toString()).toContain('"content":"hi"');
    expect(reply.body.toString()).not.toContain(USAGE_CHUNK);
  });

  // One that streams gets include_usage at its end: stream-usage-large-body.test.ts.
  it("streams a chunked body past the limit that does not stream upstream untouched, byte for byte", async () => {
    const pad = randomBytes(STREAM_USAGE_BODY_LIMIT).toString("hex");
    const body = Buffer.from(JSON.stringify({ model: "m", stream: false, pad }));
    const reply = await chunkedChat("/v1/chat/completions", body, 64 * 1024);
    expect(reply.status).toBe(200);
    const got = received.at(-1)!;
    expect(got.length).toBe(body.length);
    expect(got.sha256).toBe(sha256(body));
    expect(got.headers["transfer-encoding"]).toBe("chunked");
    expect(got.headers["content-length"]).toBeUndefined();
  });

  it("aborts the upstream request when the client leaves a body past the limit midway", async () => {
    const client = openChunkedChat("/v1/abandoned");
    client.write(`{"stream":true,"pad":"${"x".repeat(STREAM_USAGE_BODY_LIMIT)}`);
    // The upstream request started (the body went past the limit); the client leaves.
    while (abandoned.length === 0) await once(upstream.server, "request");
    client.destroy();
    const upstreamSide = abandoned[0]!;
    await upstreamSide.closed;
    expect(upstreamSide.req.complete).toBe(false);
  });

  it("sends nothing upstream when the client leaves before its body ends within the limit", async () => {
    const before = upstreamRequests;
    const gone = await clientGoneCount();
    const client = openChunkedChat("/v1/chat/completions");
    // The client leaves once the proxy has its request, before the body's end.
    proxy.server.once("request", () => client.destroy());
    client.write('{"stream":true,"messages":[');
    await vi.waitFor(async () => expect(await clientGoneCount()).toBe(gone + 1), {
      timeout: 5_000,
    });
    expect(upstreamRequests).toBe(before);
  });
});
