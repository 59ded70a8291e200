import { createHash } from "node:crypto";
import type { Server } from "node:http";
import { create, SnapshotSchema } from "@clawgate/proto";
import pino from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { closeLoopbackServer, listenOnLoopback } from "../testing/loopback-server.js";
import { plainRequest } from "../testing/plain-request.js";
import { PoolRegistry } from "../upstream/pool-registry.js";
import { createProxyHandler } from "./proxy-handler.js";

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

// Review 20c, High 1: the stale-if-error key is route, host and URL, naming no caller, so a
// copy kept for one tenant was served to another tenant and to anonymous clients.
describe("stale-if-error and credentials", () => {
  let upstream: { server: Server; port: number };
  let proxy: { server: Server; port: number };
  const pools = new PoolRegistry();
  let failing = false;
  let compiled: CompiledSnapshot;

  beforeAll(async () => {
    upstream = await listenOnLoopback((req, res) => {
      if (failing) {
        res.writeHead(503).end();
        return;
      }
      const tenant = req.headers["x-clawgate-tenant"] ?? "nobody";
      const cookie = req.headers.cookie ?? "";
      res.writeHead(200, { "content-type": "text/plain" }).end(`secret data of ${tenant}${cookie}`);
    });
    const result = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [{ name: "app", nodes: [{ address: `127.0.0.1:${upstream.port}`, weight: 1 }] }],
        tenants: [
          { name: "alice", apiKeySha256: [sha256("alice-key")] },
          { name: "bob", apiKeySha256: [sha256("bob-key")] },
        ],
        routes: [
          {
            name: "account",
            match: { pathPrefix: "/" },
            upstream: "app",
            auth: { tenants: "optional" },
            retry: { attempts: 0 },
            fallback: { staleIfErrorSeconds: 300 },
          },
        ],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    compiled = result.value;
    proxy = await listenOnLoopback(
      createProxyHandler({
        current: () => compiled,
        pools,
        metrics: new ProxyMetrics(new Registry()),
        logger: pino({ level: "silent" }),
      }),
    );
  });

  afterAll(async () => {
    await closeLoopbackServer(proxy.server);
    await pools.close();
    await closeLoopbackServer(upstream.server);
  });

  it("keeps no copy of a tenant's answer: anonymous clients and other tenants get the error", async () => {
    failing = false;
    for (const headers of <Record<string, string>[]>[
      { "x-api-key": "alice-key" },
      { authorization: "Bearer alice-key" },
      { cookie: "session=alice" },
    ]) {
      const alice = await plainRequest(proxy.port, "/account", { headers });
      expect(alice.status).toBe(200);
      expect(alice.body.toString()).toMatch(/alice/);
    }
    failing = true;
    for (const headers of <Record<string, string>[]>[{}, { "x-api-key": "bob-key" }]) {
      const other = await plainRequest(proxy.port, "/account", { headers });
      expect(other.status).toBe(503);
      expect(other.headers["x-clawgate-cache"]).toBeUndefined();
      expect(other.body.toString()).not.toMatch(/alice/);
    }
  });

  it("serves no copy to a tenant, even one an anonymous request left", async () => {
    failing = false;
    const anonymous = await plainRequest(proxy.port, "/public", {});
    expect(anonymous.body.toString()).toBe("secret data of nobody");
    failing = true;
    expect((await plainRequest(proxy.port, "/public", {})).headers["x-clawgate-cache"]).toBe(
      "stale",
    );
    const bob = await plainRequest(proxy.port, "/public", { headers: { "x-api-key": "bob-key" } });
    expect(bob.status).toBe(503);
    expect(bob.headers["x-clawgate-cache"]).toBeUndefined();
  });
});
