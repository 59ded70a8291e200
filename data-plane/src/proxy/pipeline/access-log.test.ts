import { once } from "node:events";
import { request, type Server } from "node:http";
import { Writable } from "node:stream";
import { create, SnapshotSchema } from "@clawgate/proto";
import pino from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accessLogSinkOn } from "../../access-log/access-log-sink.js";
import { compileSnapshot } from "../../compiler/compile-snapshot.js";
import { ProxyMetrics } from "../../metrics/proxy-metrics.js";
import { closeLoopbackServer, listenOnLoopback } from "../../testing/loopback-server.js";
import { PoolRegistry } from "../../upstream/pool-registry.js";
import { createProxyHandler } from "../proxy-handler.js";

/** The access log's raw lines, and a wait for the one of a request id. */
class LineCollector extends Writable {
  readonly lines: string[] = [];

  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    for (const line of String(chunk).split("\n")) if (line !== "") this.lines.push(line);
    this.emit("line");
    done();
  }

  async lineOf(requestId: string): Promise<{ raw: string; fields: Record<string, unknown> }> {
    for (;;) {
      const raw = this.lines.find((l) => JSON.parse(l).requestId === requestId);
      if (raw !== undefined) return { raw, fields: JSON.parse(raw) };
      await once(this, "line");
    }
  }
}

interface Reply {
  status: number;
  requestId: string;
  body: Buffer;
}

function send(
  port: number,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path, method: options.method ?? "GET", headers: options.headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode!,
            requestId: String(res.headers["x-request-id"]),
            body: Buffer.concat(chunks),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

describe("access log", () => {
  const collector = new LineCollector();
  const pools = new PoolRegistry();
  let upstream: { server: Server; port: number };
  let proxy: { server: Server; port: number };
  let refusedPort = 0;

  beforeAll(async () => {
    const refused = await listenOnLoopback(() => {});
    refusedPort = refused.port;
    await closeLoopbackServer(refused.server);
    // Echoes the request body after a fixed prefix, so both byte counts are known.
    upstream = await listenOnLoopback((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => res.end(Buffer.concat([Buffer.from("echo:"), ...chunks])));
    });
    const result = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [
          { name: "live", nodes: [{ address: `127.0.0.1:${upstream.port}`, weight: 1 }] },
          { name: "dead", nodes: [{ address: `127.0.0.1:${refusedPort}`, weight: 1 }] },
        ],
        routes: [
          { name: "api", match: { pathPrefix: "/api" }, upstream: "live" },
          { name: "down", match: { pathPrefix: "/down" }, upstream: "dead" },
          {
            name: "usage",
            match: { pathPrefix: "/usage" },
            upstream: "live",
            usage: { injectStreamUsage: true },
          },
          {
            name: "usage-retried",
            match: { pathPrefix: "/retried" },
            upstream: "live",
            retry: { attempts: 1 },
            usage: { injectStreamUsage: true },
          },
        ],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    const compiled = result.value;
    const handler = createProxyHandler({
      current: () => compiled,
      pools,
      metrics: new ProxyMetrics(new Registry()),
      logger: pino({ level: "silent" }),
      // Batches handed on at once: each test waits for its line, not for a 1 s flush.
      accessLog: accessLogSinkOn(collector, { flushAfterMs: 1 }),
    });
    proxy = await listenOnLoopback(handler);
  });

  afterAll(async () => {
    await closeLoopbackServer(proxy.server);
    await pools.close();
    await closeLoopbackServer(upstream.server);
  });

  it("writes one line per proxied request with its fields, the query left out", async () => {
    const reply = await send(proxy.port, "/api/items?limit=5", {
      method: "POST",
      headers: { host: "shop.test", "content-type": "text/plain" },
      body: "hello",
    });
    expect(reply.status).toBe(200);
    const { fields } = await collector.lineOf(reply.requestId);
    expect(fields).toMatchObject({
      method: "POST",
      host: "shop.test",
      path: "/api/items",
      route: "api",
      upstream: "live",
      node: `127.0.0.1:${upstream.port}`,
      status: 200,
      attempts: 1,
      bytesIn: 5,
      bytesOut: reply.body.length,
      client: "127.0.0.1",
    });
    expect(Number.isNaN(Date.parse(String(fields.time)))).toBe(false);
    expect(typeof fields.durationMs).toBe("number");
    expect(typeof fields.headersMs).toBe("number");
    expect(fields).not.toHaveProperty("failure");
    expect(collector.lines.filter((l) => l.includes(reply.requestId))).toHaveLength(1);
  });

  it.each([
    ["declared", { "content-length": "15" }],
    ["chunked", { "transfer-encoding": "chunked" }],
  ])(
    "counts a %s body the gateway added include_usage to as the client sent it",
    async (_framing, framing) => {
      const body = '{"stream":true}';
      const reply = await send(proxy.port, "/usage/chat", {
        method: "POST",
        headers: { "content-type": "application/json", ...framing },
        body,
      });
      // The upstream got (and echoed) the longer body; the client sent 15 bytes.
      expect(reply.body.toString()).toBe(
        'echo:{"stream_options":{"include_usage":true},"stream":true}',
      );
      const { fields } = await collector.lineOf(reply.requestId);
      expect(fields.bytesIn).toBe(body.length);
    },
  );

  it.each([
    ["declared", (bytes: number) => ({ "content-length": String(bytes) })],
    ["chunked", () => ({ "transfer-encoding": "chunked" })],
  ])(
    "counts a %s body over 1 MiB that got include_usage at its end as the client sent it",
    async (_framing, framing) => {
      // On a retrying route it goes as a ReplayableBody, whose bytesRead counts the field too.
      const body = `{"stream":true,"pad":"${"x".repeat(2 * 1024 * 1024)}"}`;
      const reply = await send(proxy.port, "/retried/chat", {
        method: "POST",
        headers: { "content-type": "application/json", ...framing(body.length) },
        body,
      });
      expect(reply.body.toString()).toBe(
        `echo:${body.slice(0, -1)},"stream_options":{"include_usage":true}}`,
      );
      const { fields } = await collector.lineOf(reply.requestId);
      expect(fields.bytesIn).toBe(body.length);
    },
  );

  it("never logs tokens, cookies, API keys or the query string", async () => {
    const reply = await send(proxy.port, "/api/x?access_token=secret-in-query", {
      headers: {
        authorization: "Bearer secret-bearer",
        cookie: "session=secret-cookie",
        "x-api-key": "secret-api-key",
      },
    });
    const { raw } = await collector.lineOf(reply.requestId);
    expect(raw).not.toMatch(/secret/);
  });

  it("names the failure kind of a 502 and the node that refused", async () => {
    const reply = await send(proxy.port, "/down/thing");
    expect(reply.status).toBe(502);
    const { fields } = await collector.lineOf(reply.requestId);
    expect(fields).toMatchObject({
      route: "down",
      upstream: "dead",
      node: `127.0.0.1:${refusedPort}`,
      status: 502,
      attempts: 1,
      failure: "refused",
      bytesOut: reply.body.length,
    });
  });

  it("logs a request no route matches: 404, no upstream, no attempt", async () => {
    const reply = await send(proxy.port, "/nowhere?key=secret-value");
    expect(reply.status).toBe(404);
    const { raw, fields } = await collector.lineOf(reply.requestId);
    expect(fields).toMatchObject({ path: "/nowhere", status: 404, attempts: 0 });
    expect(fields.bytesOut).toBe(reply.body.length);
    expect(fields).not.toHaveProperty("route");
    expect(fields).not.toHaveProperty("upstream");
    expect(raw).not.toMatch(/secret/);
  });
});
