import { once } from "node:events";
import { createServer, type IncomingMessage, request, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { create, SnapshotSchema } from "@clawgate/proto";
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

/** A handshake's answer when it is not a 101 (a 101 here would be a failure of the test). */
function handshake(port: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: "127.0.0.1",
      port,
      path: "/ws/x",
      agent: false,
      headers: { connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13" },
    });
    req.on("upgrade", () => reject(new Error("expected an error answer, got 101")));
    req.on("response", (res: IncomingMessage) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("websocket handshakes and the route's timeouts", () => {
  const servers: Server[] = [];
  const held: Socket[] = [];
  afterEach(async () => {
    for (const socket of held.splice(0)) socket.destroy();
    for (const server of servers.splice(0)) await closeLoopbackServer(server);
  });

  /** A node that accepts the handshake's connection and never answers it. */
  async function silentNode(): Promise<string> {
    const server = createServer();
    server.on("upgrade", (_req, socket: Socket) => held.push(socket));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    servers.push(server);
    return `127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async function proxyTo(nodeAddress: string, timeouts: { headersMs: number; totalMs: number }) {
    const registry = new Registry();
    const logger = pino({ level: "silent" });
    const compiled = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        // Opens on the first failure: the next handshake shows whether the breaker learned it.
        breakers: [{ name: "b", consecutiveFailures: 1, minRequests: 100, cooldownMs: 60_000 }],
        upstreams: [{ name: "u", breaker: "b", nodes: [{ address: nodeAddress, weight: 1 }] }],
        routes: [{ name: "ws", match: { pathPrefix: "/ws" }, upstream: "u", timeouts }],
      }),
    );
    if (!compiled.ok) throw new Error(compiled.reason);
    const proxy = createServer((_req, res) => res.writeHead(500).end());
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
    servers.push(proxy);
    return (proxy.address() as AddressInfo).port;
  }

  it.each([
    ["headersMs", { headersMs: 200, totalMs: 600_000 }],
    ["totalMs", { headersMs: 600_000, totalMs: 200 }],
  ])(
    "a node that never answers fails the handshake at the route's %s: 504, and the breaker records it",
    async (_, timeouts) => {
      const port = await proxyTo(await silentNode(), timeouts);
      const first = await handshake(port);
      expect(first.status).toBe(504);
      expect(first.body).toContain("CLAWGATE_UPSTREAM_TIMEOUT");
      // Recorded as a failure (not handed back unrecorded): the breaker opened.
      const second = await handshake(port);
      expect(second.status).toBe(503);
      expect(second.body).toContain("CLAWGATE_BREAKER_OPEN");
    },
  );
});
