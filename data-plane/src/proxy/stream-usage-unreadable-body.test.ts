import { createHash } from "node:crypto";
import { Agent, type IncomingHttpHeaders, request, type Server } from "node:http";
import { gzipSync } from "node:zlib";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accessLogSinkOn } from "../access-log/access-log-sink.js";
import { errorBody } from "../errors/error-catalog.js";
import { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { STREAM_USAGE_BODY_LIMIT } from "../quota/stream-usage-request.js";
import { AccessLogLines } from "../testing/access-log-lines.js";
import { fixedProxyHandler } from "../testing/fixed-proxy.js";
import { closeLoopbackServer, listenOnLoopback } from "../testing/loopback-server.js";
import { type BodyFraming, framedPost } from "../testing/plain-request.js";
import { PoolRegistry } from "../upstream/pool-registry.js";

/** A request the upstream read to its end: its path, headers and body's hash. */
interface Completed {
  path: string;
  headers: IncomingHttpHeaders;
  length: number;
  sha256: string;
}

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");

/** A streaming chat request as JSON text, padded to about `chars` characters. */
const chat = (chars = 0) =>
  JSON.stringify({ model: "m", stream: true, messages: [], pad: "x".repeat(chars) });

// Route usage.injectStreamUsage with bodies the gateway cannot read while an upstream can: one
// a Content-Encoding compresses, one a Python upstream decodes as UTF-16/32. Passed on, they
// would stream without usage, free of the token budget; they are refused with 415 instead.
describe("a request body the include_usage rewrite cannot read", () => {
  const completed: Completed[] = [];
  const lines = new AccessLogLines();
  const registry = new Registry();
  const pools = new PoolRegistry();
  let upstream: { server: Server; port: number };
  let proxy: { server: Server; port: number };

  beforeAll(async () => {
    upstream = await listenOnLoopback((req, res) => {
      // A request the proxy cuts short fails here: that is what the refused ones must do.
      req.on("error", () => {});
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        completed.push({
          path: req.url ?? "",
          headers: req.headers,
          length: body.length,
          sha256: sha256(body),
        });
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end("data: [DONE]\n\n");
      });
    });
    const node = [{ address: `127.0.0.1:${upstream.port}`, weight: 1 }];
    const snapshot = {
      upstreams: [{ name: "model", nodes: node }],
      routes: [
        {
          name: "chat",
          match: { pathPrefix: "/v1" },
          upstream: "model",
          usage: { injectStreamUsage: true },
        },
        { name: "plain", match: { pathPrefix: "/plain" }, upstream: "model" },
      ],
    };
    proxy = await listenOnLoopback(
      fixedProxyHandler(snapshot, pools, {
        metrics: new ProxyMetrics(registry),
        accessLog: accessLogSinkOn(lines, { flushAfterMs: 1 }),
      }),
    );
  });

  afterAll(async () => {
    await closeLoopbackServer(proxy.server);
    await pools.close();
    await closeLoopbackServer(upstream.server);
  });

  const post = (
    path: string,
    body: Buffer,
    framing: BodyFraming,
    headers: Record<string, string> = {},
  ) =>
    framedPost(proxy.port, path, body, framing, { "content-type": "application/json", ...headers });

  /**
   * A POST on `agent`'s connection: its status once the whole exchange, upload included,
   * ended without error, and whether it went on a connection used before.
   */
  const keptAlive = (
    agent: Agent,
    path: string,
    body: Buffer,
    framing: "declared" | "chunked",
  ): Promise<{ status: number; reusedSocket: boolean }> =>
    new Promise((resolve, reject) => {
      const client = request(
        {
          host: "127.0.0.1",
          port: proxy.port,
          path,
          method: "POST",
          headers: framing === "declared" ? { "content-length": String(body.length) } : {},
          agent,
        },
        (res) => {
          res.resume();
          res.on("end", () =>
            client.once("close", () =>
              resolve({ status: res.statusCode!, reusedSocket: client.reusedSocket }),
            ),
          );
        },
      );
      client.on("error", reject);
      for (let i = 0; i < body.length; i += 64 * 1024)
        client.write(body.subarray(i, i + 64 * 1024));
      client.end();
    });

  /** The proxy's clawgate_requests_total for a route and status code. */
  const requestsCounted = async (route: string, code: string) => {
    const metric = (await registry.getMetricsAsJSON()).find(
      (m) => m.name === "clawgate_requests_total",
    );
    const values = (metric?.values ?? []) as { labels: Record<string, unknown>; value: number }[];
    return values.find((v) => v.labels.route === route && v.labels.code === code)?.value ?? 0;
  };

  /** The client got the catalog's 415, and the upstream no complete request on `path`. */
  const expectRefused = (reply: Awaited<ReturnType<typeof post>>, path: string) => {
    expect(reply.status).toBe(415);
    const requestId = String(reply.headers["x-request-id"]);
    expect(reply.body.toString()).toBe(errorBody("CLAWGATE_UNSUPPORTED_MEDIA_TYPE", requestId));
    expect(completed.filter((c) => c.path === path)).toEqual([]);
  };

  it.each([
    ["declared", "gzip"],
    ["chunked", "br"],
    ["declared", "GZIP, identity"],
  ] as const)(
    "answers 415 to a %s body with Content-Encoding %s, logged and counted",
    async (framing, coding) => {
      const path = `/v1/encoded/${framing}/${coding.replaceAll(/\W/g, "")}`;
      const before = await requestsCounted("chat", "415");
      const reply = await post(path, gzipSync(chat()), framing, { "content-encoding": coding });
      expectRefused(reply, path);
      const line = await lines.of(String(reply.headers["x-request-id"]));
      expect(line).toMatchObject({ route: "chat", status: 415, failure: "rejected", attempts: 0 });
      expect(await requestsCounted("chat", "415")).toBe(before + 1);
    },
  );

  it("forwards a body with Content-Encoding identity as it came", async () => {
    const body = Buffer.from(chat());
    const reply = await post("/v1/identity", body, "declared", { "content-encoding": "identity" });
    expect(reply.status).toBe(200);
    const got = completed.find((c) => c.path === "/v1/identity")!;
    // The rewrite read it: include_usage was added.
    expect(got.length).toBeGreaterThan(body.length);
  });

  it.each([
    ["small", 0],
    ["2 MiB", STREAM_USAGE_BODY_LIMIT],
  ] as const)(
    "still adds include_usage to a %s UTF-8 body after its byte order mark",
    async (_size, pad) => {
      const path = `/v1/utf8-bom/${pad}`;
      const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(chat(pad))]);
      const reply = await post(path, body, "declared");
      expect(reply.status).toBe(200);
      const got = completed.find((c) => c.path === path)!;
      expect(got.length).toBe(body.length + '"stream_options":{"include_usage":true},'.length);
    },
  );

  it.each([
    ["declared", "small", 0],
    ["chunked", "small", 0],
    ["declared", "2 MiB", STREAM_USAGE_BODY_LIMIT],
    ["chunked", "2 MiB", STREAM_USAGE_BODY_LIMIT],
  ] as const)("answers 415 to a %s %s UTF-16-LE streaming request", async (framing, _size, pad) => {
    const path = `/v1/wide/${framing}/${pad}`;
    const body = Buffer.from(chat(pad), "utf16le");
    expect(body.length > STREAM_USAGE_BODY_LIMIT).toBe(pad > 0);
    const before = await requestsCounted("chat", "415");
    const reply = await post(path, body, framing);
    expectRefused(reply, path);
    expect(await requestsCounted("chat", "415")).toBe(before + 1);
  });

  it("answers 415 to a 2 MiB UTF-32-BE request with a byte order mark", async () => {
    const text = ` ${chat(STREAM_USAGE_BODY_LIMIT / 2)}`;
    const body = Buffer.alloc(4 + text.length * 4);
    body.writeUInt32BE(0xfeff, 0);
    for (let i = 0; i < text.length; i++) body.writeUInt32BE(text.charCodeAt(i), 4 + i * 4);
    expectRefused(await post("/v1/wide32", body, "declared"), "/v1/wide32");
  });

  it.each(["declared", "chunked"] as const)(
    "reads the rest of a refused %s large body, so its connection serves the next request",
    async (framing) => {
      // The client is answered at the body's first bytes, while it still sends: unless the
      // rest is read and dropped, its upload fails and the connection is closed after the 415.
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        // About 2 MiB: over the read-whole limit, within what a refusal reads and drops.
        const wide = Buffer.from(chat(STREAM_USAGE_BODY_LIMIT), "utf16le");
        const path = `/v1/wide-then-more/${framing}`;
        const refused = await keptAlive(agent, path, wide, framing);
        expect(refused.status).toBe(415);
        expect(completed.filter((c) => c.path === path)).toEqual([]);
        const next = await keptAlive(agent, "/v1/after", Buffer.from(chat()), "declared");
        expect(next.status).toBe(200);
        expect(next.reusedSocket).toBe(true);
      } finally {
        agent.destroy();
      }
    },
  );

  it("forwards such bodies untouched on a route without injectStreamUsage", async () => {
    const gzip = gzipSync(chat());
    const small = Buffer.from(chat(), "utf16le");
    const large = Buffer.from(chat(STREAM_USAGE_BODY_LIMIT), "utf16le");
    const sent: [string, Buffer, Record<string, string>][] = [
      ["/plain/gzip", gzip, { "content-encoding": "gzip" }],
      ["/plain/small", small, {}],
      ["/plain/large", large, {}],
    ];
    for (const [path, body, headers] of sent) {
      const reply = await post(path, body, "declared", headers);
      expect(reply.status).toBe(200);
      const got = completed.find((c) => c.path === path)!;
      expect(got.length).toBe(body.length);
      expect(got.sha256).toBe(sha256(body));
      expect(got.headers["content-encoding"]).toBe(headers["content-encoding"]);
    }
  });
});
