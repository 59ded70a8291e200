import { once } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { create, SnapshotSchema } from "@clawgate/proto";
import pino from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileSnapshot } from "../../compiler/compile-snapshot.js";
import { ProxyMetrics } from "../../metrics/proxy-metrics.js";
import { closeLoopbackServer } from "../../testing/loopback-server.js";
import { PoolRegistry } from "../../upstream/pool-registry.js";
import { RequestHealing } from "../request-healing.js";
import { Tunnels } from "./tunnels.js";
import { createUpgradeHandler } from "./upgrade-handler.js";

const APP = "https://app.example";

/**
 * A handshake with `method` and extra headers, written on a raw socket (node's client cannot
 * read a HEAD answer that carries a body): its status, and the error code if any.
 */
async function handshake(
  port: number,
  method: string,
  path: string,
  extra: Record<string, string> = {},
): Promise<{ status: number; code?: string }> {
  const socket = connect(port, "127.0.0.1");
  socket.setEncoding("utf8");
  let text = "";
  socket.on("data", (chunk: string) => {
    text += chunk;
    // A 101 leaves the tunnel open: its head is all this needs.
    if (text.startsWith("HTTP/1.1 101") && text.includes("\r\n\r\n")) socket.destroy();
  });
  const lines = [
    `${method} ${path} HTTP/1.1`,
    "Host: a.test",
    "Connection: Upgrade",
    "Upgrade: websocket",
    ...Object.entries(extra).map(([name, value]) => `${name}: ${value}`),
  ];
  socket.write(`${lines.join("\r\n")}\r\n\r\n`);
  await once(socket, "close");
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  const body = text.slice(text.indexOf("\r\n\r\n") + 4);
  return status === 101 || body === "" ? { status } : { status, code: JSON.parse(body).error.code };
}

describe("websocket handshakes the upgrade handler refuses", () => {
  let node: Server;
  let proxy: Server;
  let port: number;
  /** Methods of the handshakes that reached the node. */
  const reached: string[] = [];

  beforeAll(async () => {
    node = createServer();
    node.on("upgrade", (req: IncomingMessage, socket: Socket) => {
      reached.push(req.method ?? "");
      socket.end(
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\r\n",
      );
    });
    node.listen(0, "127.0.0.1");
    await once(node, "listening");
    const address = `127.0.0.1:${(node.address() as AddressInfo).port}`;
    const compiled = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [{ name: "u", nodes: [{ address, weight: 1 }] }],
        routes: [
          // A public route for HEAD only: a HEAD handshake used to match it and reach the node
          // as a GET, to a path whose GET the private route guards.
          { name: "head-only", match: { path: "/private", methods: ["HEAD"] }, upstream: "u" },
          { name: "private", match: { path: "/private" }, upstream: "u", ipDeny: ["127.0.0.0/8"] },
          {
            name: "ws",
            match: { pathPrefix: "/ws" },
            upstream: "u",
            cors: { allowOrigins: [APP], maxAgeSeconds: 600 },
          },
        ],
      }),
    );
    if (!compiled.ok) throw new Error(compiled.reason);
    const registry = new Registry();
    const logger = pino({ level: "silent" });
    proxy = createServer();
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
    port = (proxy.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await closeLoopbackServer(proxy);
    await closeLoopbackServer(node);
  });

  // Review 20c, Medium 3 (RFC 6455 section 4.1: the handshake is a GET).
  it.each(["HEAD", "POST", "PUT"])(
    "answers 400 to a %s handshake and tries no node",
    async (method) => {
      const before = reached.length;
      expect(await handshake(port, method, "/private")).toMatchObject({ status: 400 });
      expect(reached.slice(before)).toEqual([]);
    },
  );

  it("routes a GET handshake under GET: the private route's policy holds", async () => {
    expect(await handshake(port, "GET", "/private")).toEqual({
      status: 403,
      code: "CLAWGATE_IP_DENIED",
    });
  });

  // Review 20c, Low 14: cross-site WebSocket hijacking on a route with cors.allowOrigins.
  it("answers 403 CLAWGATE_ORIGIN_DENIED to an origin outside allowOrigins, before any node", async () => {
    const before = reached.length;
    expect(await handshake(port, "GET", "/ws", { origin: "https://evil.example" })).toEqual({
      status: 403,
      code: "CLAWGATE_ORIGIN_DENIED",
    });
    expect(reached.slice(before)).toEqual([]);
    expect(await handshake(port, "GET", "/ws", { origin: APP })).toEqual({ status: 101 });
    expect(await handshake(port, "GET", "/ws")).toEqual({ status: 101 });
    expect(reached.slice(before)).toEqual(["GET", "GET"]);
  });
});
