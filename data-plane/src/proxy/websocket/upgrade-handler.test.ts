import { createHash } from "node:crypto";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, request, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { create, SnapshotSchema } from "@clawgate/proto";
import { makeTestPki } from "@clawgate/runtime/testing";
import pino from "pino";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { compileSnapshot } from "../../compiler/compile-snapshot.js";
import { ProxyMetrics } from "../../metrics/proxy-metrics.js";
import { closeLoopbackServer } from "../../testing/loopback-server.js";
import { PoolRegistry } from "../../upstream/pool-registry.js";
import { RequestHealing } from "../request-healing.js";
import { Tunnels } from "./tunnels.js";
import { createUpgradeHandler } from "./upgrade-handler.js";

type Answer = { status: number; body: string; headers: IncomingMessage["headers"] };
type Handshake = Answer | { status: 101; socket: Socket };

/** A WebSocket handshake with node's own client: 'upgrade' on 101, 'response' otherwise. */
function handshake(
  port: number,
  path: string,
  upgrade = "websocket",
  extra: Record<string, string> = {},
): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: "127.0.0.1",
      port,
      path,
      agent: false,
      headers: { connection: "Upgrade", upgrade, "sec-websocket-version": "13", ...extra },
    });
    req.on("upgrade", (_res, socket: Socket) => resolve({ status: 101, socket }));
    req.on("response", (res: IncomingMessage) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** The upstream: 101 then an echo of raw bytes, or the status `refuse` gives. */
async function upstreamServer(
  refuse?: number,
  tls?: { cert: Buffer; key: Buffer },
): Promise<{ server: Server; address: string }> {
  const answer426 = (_req: unknown, res: { writeHead(status: number): { end(): void } }) =>
    res.writeHead(426).end();
  const server = (
    tls === undefined ? createServer(answer426) : createHttpsServer(tls, answer426)
  ) as Server;
  server.on("upgrade", (_req, socket: Socket) => {
    if (refuse !== undefined) {
      const body = `refused with ${refuse}`;
      socket.end(
        `HTTP/1.1 ${refuse} No\r\nwww-authenticate: Bearer realm="ws"\r\n` +
          `content-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
      );
      return;
    }
    socket.write(
      "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\r\n",
    );
    socket.pipe(socket);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { server, address: `127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe("websocket upgrade handler", () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await closeLoopbackServer(server);
  });

  async function proxyTo(
    nodeAddress: string,
    tls?: { enabled: boolean; caFile: string },
    breaker: Record<string, number> = {},
  ) {
    const registry = new Registry();
    const logger = pino({ level: "silent" });
    const compiled = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        // Opens on the first failure, so one handshake shows what the breaker learned.
        breakers: [
          { name: "b", consecutiveFailures: 1, minRequests: 100, cooldownMs: 60_000, ...breaker },
        ],
        upstreams: [{ name: "u", breaker: "b", nodes: [{ address: nodeAddress, weight: 1 }], tls }],
        routes: [{ name: "ws", match: { pathPrefix: "/ws" }, upstream: "u" }],
      }),
    );
    if (!compiled.ok) throw new Error(compiled.reason);
    const refused: string[] = [];
    const healing = new RequestHealing({
      registry,
      logger,
      reportRefused: (_upstream, address) => refused.push(address),
    });
    const tunnels = new Tunnels(registry);
    const pools = new PoolRegistry();
    const proxy = createServer((_req, res) => res.writeHead(500).end());
    proxy.on(
      "upgrade",
      createUpgradeHandler({
        current: () => compiled.value,
        pools,
        metrics: new ProxyMetrics(registry),
        healing,
        tunnels,
        logger,
      }),
    );
    proxy.listen(0, "127.0.0.1");
    await once(proxy, "listening");
    servers.push(proxy);
    const port = (proxy.address() as AddressInfo).port;
    return { port, tunnels, refused, healing, registry };
  }

  it("tunnels bytes both ways after the node's 101, counted until either side closes", async () => {
    const node = await upstreamServer();
    servers.push(node.server);
    const { port, tunnels, registry } = await proxyTo(node.address);
    const answer = await handshake(port, "/ws/x");
    if (!("socket" in answer)) throw new Error(`expected 101, got ${answer.status}`);
    answer.socket.write("ping");
    const [echo] = (await once(answer.socket, "data")) as [Buffer];
    expect(echo.toString()).toBe("ping");
    expect(tunnels.size).toBe(1);
    expect((await registry.getSingleMetric("clawgate_websocket_tunnels")!.get()).values).toEqual([
      { labels: { route: "ws" }, value: 1 },
    ]);
    answer.socket.end();
    while (tunnels.size > 0) await new Promise((resolve) => setImmediate(resolve));
  });

  it("closeAll sends the client a 1001 close frame and ends the tunnel", async () => {
    const node = await upstreamServer();
    servers.push(node.server);
    const { port, tunnels } = await proxyTo(node.address);
    const answer = await handshake(port, "/ws/x");
    if (!("socket" in answer)) throw new Error(`expected 101, got ${answer.status}`);
    const chunks: Buffer[] = [];
    answer.socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    const closed = once(answer.socket, "close");
    tunnels.closeAll();
    await closed;
    expect(Buffer.concat(chunks)).toEqual(Buffer.from([0x88, 0x02, 0x03, 0xe9]));
    while (tunnels.size > 0) await new Promise((resolve) => setImmediate(resolve));
  });

  it("a node's 5xx to the handshake reaches the client as sent, and the breaker learns it", async () => {
    const node = await upstreamServer(500);
    servers.push(node.server);
    // A 5xx counts toward the failure ratio, as it does for any request.
    const { port, tunnels } = await proxyTo(node.address, undefined, {
      minRequests: 1,
      failureRatio: 0.5,
    });
    const first = await handshake(port, "/ws/x");
    expect(first).toMatchObject({ status: 500, body: "refused with 500" });
    const second = await handshake(port, "/ws/x");
    expect(second.status).toBe(503);
    expect("body" in second && second.body).toContain("CLAWGATE_BREAKER_OPEN");
    expect(tunnels.size).toBe(0);
  });

  it("a node's 401 to the handshake reaches the client with its headers and body; the breaker stays closed", async () => {
    const node = await upstreamServer(401);
    servers.push(node.server);
    const { port, tunnels } = await proxyTo(node.address);
    for (let i = 0; i < 3; i++) {
      const answer = await handshake(port, "/ws/x");
      if (!("body" in answer)) throw new Error("expected the node's answer, got 101");
      const { status, body, headers } = answer;
      expect(status).toBe(401);
      expect(body).toBe("refused with 401");
      expect(headers["www-authenticate"]).toBe('Bearer realm="ws"');
      expect(headers["x-request-id"]).toBeDefined();
      expect(headers.connection).toBe("close");
    }
    expect(tunnels.size).toBe(0);
  });

  it("a refused connection is reported to passive health and answered 502", async () => {
    // A port that was free a moment ago: nothing listens there now.
    const gone = await upstreamServer();
    const address = gone.address;
    await closeLoopbackServer(gone.server);
    const { port, refused } = await proxyTo(address);
    const answer = await handshake(port, "/ws/x");
    expect(answer.status).toBe(502);
    expect("body" in answer && answer.body).toContain("CLAWGATE_UPSTREAM_CONNECT_FAILED");
    expect(refused).toEqual([address]);
  });

  it.each([
    ["no route", "/elsewhere", "websocket", 404, "CLAWGATE_ROUTE_NOT_FOUND"],
    [
      "a path that cannot be normalized safely",
      "/ws/..;/admin",
      "websocket",
      400,
      "CLAWGATE_BAD_REQUEST",
    ],
    ["an upgrade to another protocol", "/ws/x", "h2c", 400, "CLAWGATE_BAD_REQUEST"],
  ])(
    "%s is refused with a catalog error over the raw socket",
    async (_what, path, upgrade, status, code) => {
      const { port } = await proxyTo("127.0.0.1:9");
      const answer = await handshake(port, path, upgrade);
      expect(answer.status).toBe(status);
      expect("body" in answer && answer.body).toContain(code);
    },
  );

  it("reaches a node of a TLS upstream over TLS (wss), with its certificate checked", async () => {
    const pki = await makeTestPki();
    const node = await upstreamServer(undefined, {
      cert: readFileSync(pki.serverCert),
      key: readFileSync(pki.serverKey),
    });
    servers.push(node.server);
    const { port } = await proxyTo(node.address, { enabled: true, caFile: pki.caCert });
    const answer = await handshake(port, "/ws/secure");
    if (!("socket" in answer)) throw new Error(`expected 101, got ${answer.status}`);
    answer.socket.write("over tls");
    const [echo] = (await once(answer.socket, "data")) as [Buffer];
    expect(echo.toString()).toBe("over tls");
    answer.socket.destroy();
  });
});

describe("websocket upgrade handler with route policies", () => {
  it("holds back the tenant an upstream cooled down, not another (retryAfterScope tenant)", async () => {
    const node = await upstreamServer();
    const registry = new Registry();
    const sha = (key: string) => createHash("sha256").update(key).digest("hex");
    const compiled = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [
          { name: "u", nodes: [{ address: node.address, weight: 1 }], retryAfterScope: "tenant" },
        ],
        routes: [
          {
            name: "ws",
            match: { pathPrefix: "/ws" },
            upstream: "u",
            auth: { tenants: "required" },
          },
        ],
        tenants: [
          { name: "alpha", apiKeySha256: [sha("ka")] },
          { name: "beta", apiKeySha256: [sha("kb")] },
        ],
      }),
    );
    if (!compiled.ok) throw new Error(compiled.reason);
    const logger = pino({ level: "silent" });
    const healing = new RequestHealing({ registry, logger });
    healing.sync(compiled.value);
    healing.upstream("u")!.tenantCooldowns.blockFor("alpha", 60_000);
    const proxy = createServer();
    proxy.on(
      "upgrade",
      createUpgradeHandler({
        current: () => compiled.value,
        pools: new PoolRegistry(),
        metrics: new ProxyMetrics(registry),
        healing,
        tunnels: new Tunnels(registry),
        logger,
      }),
    );
    proxy.listen(0, "127.0.0.1");
    await once(proxy, "listening");
    try {
      const port = (proxy.address() as AddressInfo).port;
      const alpha = await handshake(port, "/ws/x", "websocket", { "x-api-key": "ka" });
      expect(alpha.status).toBe(503);
      const beta = await handshake(port, "/ws/x", "websocket", { "x-api-key": "kb" });
      expect(beta.status).toBe(101);
      if ("socket" in beta) beta.socket.destroy();
    } finally {
      await closeLoopbackServer(proxy);
      await closeLoopbackServer(node.server);
    }
  });

  it("refuses a tunnel to a tenant with a token budget (403), not to one without", async () => {
    const node = await upstreamServer();
    const registry = new Registry();
    const sha = (key: string) => createHash("sha256").update(key).digest("hex");
    const compiled = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [{ name: "u", nodes: [{ address: node.address, weight: 1 }] }],
        routes: [
          {
            name: "ws",
            match: { pathPrefix: "/ws" },
            upstream: "u",
            auth: { tenants: "required" },
          },
        ],
        tenants: [
          { name: "alpha", apiKeySha256: [sha("ka")], tokensPerDay: 1000n },
          { name: "beta", apiKeySha256: [sha("kb")] },
        ],
      }),
    );
    if (!compiled.ok) throw new Error(compiled.reason);
    const logger = pino({ level: "silent" });
    const healing = new RequestHealing({ registry, logger });
    healing.sync(compiled.value);
    const proxy = createServer();
    proxy.on(
      "upgrade",
      createUpgradeHandler({
        current: () => compiled.value,
        pools: new PoolRegistry(),
        metrics: new ProxyMetrics(registry),
        healing,
        tunnels: new Tunnels(registry),
        logger,
      }),
    );
    proxy.listen(0, "127.0.0.1");
    await once(proxy, "listening");
    try {
      const port = (proxy.address() as AddressInfo).port;
      const alpha = await handshake(port, "/ws/x", "websocket", { "x-api-key": "ka" });
      expect(alpha.status).toBe(403);
      expect("body" in alpha && JSON.parse(alpha.body)).toMatchObject({
        error: { code: "CLAWGATE_WEBSOCKET_NOT_METERED" },
      });
      const beta = await handshake(port, "/ws/x", "websocket", { "x-api-key": "kb" });
      expect(beta.status).toBe(101);
      if ("socket" in beta) beta.socket.destroy();
    } finally {
      await closeLoopbackServer(proxy);
      await closeLoopbackServer(node.server);
    }
  });

  it("refuses a handshake without API key on an auth route, before any node is tried", async () => {
    let reached = 0;
    const node = createServer();
    node.on("upgrade", (_req, socket: Socket) => {
      reached += 1;
      socket.destroy();
    });
    node.listen(0, "127.0.0.1");
    await once(node, "listening");
    const registry = new Registry();
    const compiled = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [
          {
            name: "u",
            nodes: [{ address: `127.0.0.1:${(node.address() as AddressInfo).port}`, weight: 1 }],
          },
        ],
        routes: [
          {
            name: "ws",
            match: { pathPrefix: "/ws" },
            upstream: "u",
            auth: { tenants: "required" },
          },
        ],
      }),
    );
    if (!compiled.ok) throw new Error(compiled.reason);
    const logger = pino({ level: "silent" });
    const proxy = createServer();
    proxy.on(
      "upgrade",
      createUpgradeHandler({
        current: () => compiled.value,
        pools: new PoolRegistry(),
        metrics: new ProxyMetrics(registry),
        healing: new RequestHealing({ registry, logger }),
        tunnels: new Tunnels(registry),
        logger,
      }),
    );
    proxy.listen(0, "127.0.0.1");
    await once(proxy, "listening");
    try {
      const answer = await handshake((proxy.address() as AddressInfo).port, "/ws/x");
      expect(answer.status).toBe(401);
      expect("body" in answer && JSON.parse(answer.body).error.code).toBe("CLAWGATE_UNAUTHORIZED");
      expect(reached).toBe(0);
    } finally {
      await closeLoopbackServer(proxy);
      await closeLoopbackServer(node);
    }
  });
});
