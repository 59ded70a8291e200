import { once } from "node:events";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { connect } from "node:net";
import { Writable } from "node:stream";
import { create, type RouteSchema, SnapshotSchema } from "@clawgate/proto";
import pino from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompiledNode, CompiledSnapshot } from "../compiler/compiled-types.js";
import { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { closeLoopbackServer, listenOnLoopback } from "../testing/loopback-server.js";
import { PoolRegistry } from "../upstream/pool-registry.js";
import { createProxyHandler } from "./proxy-handler.js";
import { RequestHealing, type UpstreamHealing } from "./request-healing.js";

/*
 * Issue 8: what a hostile or careless client or config can send must cost at most its own
 * request. Prototype keys as names, a bug inside the request path, an error event on a client
 * stream, and malformed or repeated Host lines, all through the real handler on a real socket.
 */

type RouteInit = NonNullable<Parameters<typeof create<typeof RouteSchema>>[1]>;

const PROTOTYPE_KEYS = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "valueOf",
];
/** The keys that are also valid resource names (lower case): used as route and upstream names. */
const NAME_KEYS = ["constructor", "prototype"];

const listen = listenOnLoopback;
const closeServer = closeLoopbackServer;

interface RawReply {
  status: number;
  head: string;
  body: string;
}

/**
 * Sends `head` (request line and header lines, CRLF-separated, no final blank line) as typed:
 * node's client would refuse a second Host line or fold the header names under test.
 */
async function rawRequest(port: number, lines: string[]): Promise<RawReply> {
  const socket = connect(port, "127.0.0.1");
  // Bounded: a proxy that never answers fails the test (status 0) instead of hanging it.
  socket.setTimeout(10_000, () => socket.destroy());
  socket.setEncoding("utf8");
  let text = "";
  socket.on("data", (chunk: string) => {
    text += chunk;
  });
  await once(socket, "connect");
  socket.write(`${[...lines, "Connection: close"].join("\r\n")}\r\n\r\n`);
  await once(socket, "close");
  const split = text.indexOf("\r\n\r\n");
  const head = split < 0 ? text : text.slice(0, split);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  return { status, head, body: split < 0 ? "" : text.slice(split + 4) };
}

function errorCode(reply: RawReply): string | undefined {
  return (JSON.parse(reply.body) as { error?: { code?: string } }).error?.code;
}

describe("proxy handler under hostile input", () => {
  const logLines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "info" },
    new Writable({
      write(chunk, _encoding, done) {
        logLines.push(JSON.parse(String(chunk)));
        done();
      },
    }),
  );
  let upstream: { server: Server; port: number };
  let proxy: { server: Server; port: number };
  let registry: Registry;
  let pools: PoolRegistry;
  let current: () => CompiledSnapshot | undefined;
  let good: CompiledSnapshot;

  function snapshot(): CompiledSnapshot {
    const node = { address: `127.0.0.1:${upstream.port}`, weight: 1 };
    const routes: RouteInit[] = [
      // One route gated on each prototype key as a header name, under its own path.
      ...PROTOTYPE_KEYS.map((key, i) => ({
        name: `gated-${i}`,
        match: { pathPrefix: `/gated/${i}`, headers: [{ name: key, value: "yes" }] },
        upstream: "echo",
      })),
      // Prototype keys as route, upstream and breaker names, and as a host.
      ...NAME_KEYS.map((key) => ({
        name: key,
        match: { pathPrefix: `/named/${key}`, hosts: [key] },
        upstream: key,
      })),
      { name: "echo", match: { pathPrefix: "/" }, upstream: "echo" },
    ];
    const result = compileSnapshot(
      create(SnapshotSchema, {
        version: 3n,
        breakers: NAME_KEYS.map((name) => ({ name })),
        upstreams: [
          { name: "echo", nodes: [node] },
          ...NAME_KEYS.map((name) => ({ name, breaker: name, nodes: [node] })),
        ],
        routes,
        tenants: PROTOTYPE_KEYS.map((name) => ({ name })),
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    return result.value;
  }

  beforeAll(async () => {
    upstream = await listen((req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ url: req.url, host: req.headers.host }));
    });
    registry = new Registry();
    pools = new PoolRegistry();
    good = snapshot();
    current = () => good;
    proxy = await listen(
      createProxyHandler({
        current: () => current(),
        pools,
        metrics: new ProxyMetrics(registry),
        logger,
      }),
    );
  });

  afterAll(async () => {
    await closeServer(proxy.server);
    await pools.close();
    await closeServer(upstream.server);
  });

  it.each(PROTOTYPE_KEYS.map((key, i) => [key, i] as const))(
    "routes on a %s header condition only when the header is sent",
    async (key, i) => {
      const without = await rawRequest(proxy.port, [`GET /gated/${i}/x HTTP/1.1`, "Host: a.test"]);
      // Falls through to the catch-all route: the inherited member is no header value.
      expect(without.status).toBe(200);
      expect(JSON.parse(without.body).url).toBe(`/gated/${i}/x`);
      const routedBefore = await requests(`gated-${i}`);
      const withHeader = await rawRequest(proxy.port, [
        `GET /gated/${i}/x HTTP/1.1`,
        "Host: a.test",
        `${key}: yes`,
      ]);
      expect(withHeader.status).toBe(200);
      // node:http drops a "__proto__" header line, so that condition can never hold.
      expect(await requests(`gated-${i}`)).toBe(routedBefore + (key === "__proto__" ? 0 : 1));
    },
  );

  it.each(NAME_KEYS)("serves route, upstream and host %s and labels its metrics", async (key) => {
    const reply = await rawRequest(proxy.port, [`GET /named/${key} HTTP/1.1`, `Host: ${key}`]);
    expect(reply.status).toBe(200);
    expect(JSON.parse(reply.body).host).toBe(key);
    expect(await registry.metrics()).toContain(
      `clawgate_requests_total{route="${key}",upstream="${key}",code="200"}`,
    );
  });

  it.each(PROTOTYPE_KEYS)("treats %s as an unknown host", async (key) => {
    const reply = await rawRequest(proxy.port, ["GET /named/x HTTP/1.1", `Host: ${key}:8080`]);
    expect(reply.status).toBe(200);
    expect(JSON.parse(reply.body).url).toBe("/named/x");
  });

  it("answers 500 CLAWGATE_INTERNAL to a request the proxy fails on, logs it, serves on", async () => {
    const failing = Object.create(good) as CompiledSnapshot;
    Object.defineProperty(failing, "match", {
      value: () => {
        throw new TypeError("actual.includes is not a function");
      },
    });
    current = () => failing;
    let reply: RawReply;
    try {
      reply = await rawRequest(proxy.port, [
        "GET /anything?token=secret HTTP/1.1",
        "Host: a.test",
        "X-Request-Id: bad-1",
      ]);
    } finally {
      current = () => good;
    }
    expect(reply.status).toBe(500);
    expect(JSON.parse(reply.body)).toEqual({
      error: {
        code: "CLAWGATE_INTERNAL",
        message: "The gateway failed to handle the request.",
        requestId: "bad-1",
      },
    });
    const line = logLines.find((l) => l.requestId === "bad-1" && l.level === 50);
    expect(line).toMatchObject({ path: "/anything", err: { message: expect.any(String) } });
    expect(JSON.stringify(line)).not.toContain("secret");
    expect(await registry.metrics()).toContain(
      'clawgate_requests_total{route="_none",upstream="_none",code="500"}',
    );
    // Same process, same listener: the next request is served.
    expect((await rawRequest(proxy.port, ["GET /after HTTP/1.1", "Host: a.test"])).status).toBe(
      200,
    );
  });

  it("survives an error event on the request and response streams", async () => {
    // Another listener of the same server emits what a failing socket write would.
    const inject = (req: IncomingMessage, res: ServerResponse) => {
      res.once("finish", () => {
        req.emit("error", new Error("request stream failed"));
        res.emit("error", new Error("response stream failed"));
      });
    };
    proxy.server.on("request", inject);
    let reply: RawReply;
    try {
      reply = await rawRequest(proxy.port, ["GET /stream HTTP/1.1", "Host: a.test"]);
    } finally {
      proxy.server.off("request", inject);
    }
    expect(reply.status).toBe(200);
    await expect
      .poll(() => logLines.some((l) => l.msg === "client response stream failed"))
      .toBe(true);
    expect((await rawRequest(proxy.port, ["GET /after HTTP/1.1", "Host: a.test"])).status).toBe(
      200,
    );
  });

  it.each([
    ["two Host lines", ["Host: a.test", "Host: b.test"]],
    ["two Host lines, different case", ["Host: a.test", "host: a.test"]],
    ["a non-numeric port", ["Host: a.example:abc"]],
    ["a port above 65535", ["Host: a.example:70000"]],
    ["a port of six digits", ["Host: a.example:000080"]],
    ["a port without host", ["Host: :80"]],
    ["a space inside", ["Host: a b.test"]],
    ["a path in the host", ["Host: a.test/x"]],
    ["an unclosed IPv6 literal", ["Host: [::1"]],
    ["junk after an IPv6 literal", ["Host: [::1]x"]],
  ])("answers 400 CLAWGATE_BAD_REQUEST to %s", async (_what, hostLines) => {
    const reply = await rawRequest(proxy.port, ["GET /echo HTTP/1.1", ...hostLines]);
    expect(reply.status).toBe(400);
    expect(errorCode(reply)).toBe("CLAWGATE_BAD_REQUEST");
  });

  it.each([
    ["a host name with a port", "Host: a.example:8080"],
    ["upper case", "Host: A.Example"],
    ["an IPv6 literal with a port", "Host: [::1]:80"],
    ["an IPv4 address", "Host: 127.0.0.1:65535"],
    ["an empty port", "Host: a.example:"],
  ])("serves %s", async (_what, hostLine) => {
    const reply = await rawRequest(proxy.port, ["GET /echo HTTP/1.1", hostLine]);
    expect(reply.status).toBe(200);
  });

  async function requests(route: string): Promise<number> {
    const metric = (await registry.getMetricsAsJSON()).find(
      (m) => m.name === "clawgate_requests_total",
    );
    const values = (metric?.values ?? []) as { labels: Record<string, string>; value: number }[];
    return values.filter((v) => v.labels.route === route).reduce((sum, v) => sum + v.value, 0);
  }
});

describe("a throw in an upstream callback of the exchange", () => {
  it("ends that request with 500 and leaves the process serving", async () => {
    const logLines: Record<string, unknown>[] = [];
    const logger = pino(
      { level: "info" },
      new Writable({
        write(chunk, _encoding, done) {
          logLines.push(JSON.parse(String(chunk)));
          done();
        },
      }),
    );
    const refused = await listen(() => {});
    const refusedPort = refused.port;
    await closeServer(refused.server);
    const upstream = await listen((_req, res) => res.end("ok"));
    const pools = new PoolRegistry();
    const result = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [
          { name: "dead", nodes: [{ address: `127.0.0.1:${refusedPort}`, weight: 1 }] },
          { name: "live", nodes: [{ address: `127.0.0.1:${upstream.port}`, weight: 1 }] },
        ],
        routes: [
          { name: "dead", match: { pathPrefix: "/dead" }, upstream: "dead" },
          { name: "live", match: { pathPrefix: "/" }, upstream: "live" },
        ],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    const snapshot = result.value;
    const proxy = await listen(
      createProxyHandler({
        current: () => snapshot,
        pools,
        metrics: new ProxyMetrics(new Registry()),
        logger,
        // The health registry's hook runs inside undici's error callback, where a throw would
        // escape the request listener's guard.
        healing: new RequestHealing({
          registry: new Registry(),
          logger,
          reportRefused: () => {
            throw new Error("health hook failed");
          },
        }),
      }),
    );
    try {
      const reply = await rawRequest(proxy.port, [
        "GET /dead HTTP/1.1",
        "Host: a.test",
        "X-Request-Id: refused-1",
      ]);
      expect(reply.status).toBe(500);
      expect(errorCode(reply)).toBe("CLAWGATE_INTERNAL");
      expect(logLines).toContainEqual(
        expect.objectContaining({
          requestId: "refused-1",
          err: expect.objectContaining({ message: "health hook failed" }),
        }),
      );
      const after = await rawRequest(proxy.port, ["GET /live HTTP/1.1", "Host: a.test"]);
      expect(after.status).toBe(200);
      expect(after.body).toBe("ok");
    } finally {
      await closeServer(proxy.server);
      await pools.close();
      await closeServer(upstream.server);
    }
  });
});

describe("a throw while an exchange holds the half-open probe", () => {
  it("hands the probe back and counts the request once, as a 500 of its route", async () => {
    const logger = pino({ level: "silent" });
    const refused = await listen(() => {});
    const refusedPort = refused.port;
    await closeServer(refused.server);
    const pools = new PoolRegistry();
    const clock = new FakeClock(1_000_000);
    const result = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        breakers: [{ name: "twitchy", consecutiveFailures: 1, cooldownMs: 1_000 }],
        upstreams: [
          {
            name: "dead",
            breaker: "twitchy",
            nodes: [{ address: `127.0.0.1:${refusedPort}`, weight: 1 }],
          },
        ],
        routes: [
          { name: "dead", match: { pathPrefix: "/" }, upstream: "dead", retry: { attempts: 0 } },
        ],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    const snapshot = result.value;
    let failPick = false;
    const registry = new Registry();
    const healing = new RequestHealing({ registry: new Registry(), logger, clock });
    const proxy = await listen(
      createProxyHandler({
        current: () => snapshot,
        pools,
        metrics: new ProxyMetrics(registry),
        logger,
        healing,
      }),
    );
    // The node pick runs right after the breaker hands out its permit: the spot where a throw
    // would otherwise keep the half-open probe slot forever.
    healing.sync(snapshot);
    const record = healing.upstream("dead")! as { picker: UpstreamHealing["picker"] };
    const picker = record.picker;
    record.picker = Object.assign(Object.create(picker), {
      pick: (skip?: (node: CompiledNode) => boolean) => {
        if (failPick) throw new Error("picker failed");
        return picker.pick(skip);
      },
    });
    const get = () => rawRequest(proxy.port, ["GET / HTTP/1.1", "Host: a.test"]);
    try {
      expect((await get()).status).toBe(502); // refused: the breaker opens
      expect((await get()).status).toBe(503); // open
      clock.advance(1_100); // past the cooldown and its jitter (at most 10 %): half-open
      failPick = true;
      expect((await get()).status).toBe(500);
      // The exchange ends itself: not a 500 of no route plus a 499 of the route.
      const text = await registry.metrics();
      expect(text).toContain('clawgate_requests_total{route="dead",upstream="dead",code="500"} 1');
      expect(text).not.toContain('code="499"');
      failPick = false;
      // The probe slot came back: this request probes (and is refused) instead of a 503.
      expect((await get()).status).toBe(502);
    } finally {
      await closeServer(proxy.server);
      await pools.close();
    }
  });
});
