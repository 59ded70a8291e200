import { once } from "node:events";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool, request } from "undici";
import { describe, expect, it } from "vitest";
import type { PoolSettings } from "../compiler/compiled-types.js";
import { PoolRegistry } from "./pool-registry.js";

function settings(connectTimeoutMs: number, connections: number, keepAliveMs = 4000): PoolSettings {
  const key = `${connectTimeoutMs}/${connections}/${keepAliveMs}`;
  return { key, connectTimeoutMs, connections, keepAliveTimeoutMs: keepAliveMs };
}

function keys(entries: Record<string, PoolSettings[]>): Map<string, Set<string>> {
  return new Map(Object.entries(entries).map(([a, list]) => [a, new Set(list.map((s) => s.key))]));
}

describe("PoolRegistry", () => {
  it("creates one pool per address lazily and reuses it", async () => {
    const pools = new PoolRegistry();
    expect(pools.addresses()).toEqual([]);
    const a = pools.get("127.0.0.1:1");
    expect(pools.get("127.0.0.1:1")).toBe(a);
    expect(pools.get("127.0.0.1:2")).not.toBe(a);
    expect(pools.addresses().sort()).toEqual(["127.0.0.1:1", "127.0.0.1:2"]);
    await pools.close();
  });

  it("keeps separate pools for different connect and keep-alive settings of one node", async () => {
    const pools = new PoolRegistry();
    const fast = settings(100, 0);
    const slow = settings(5000, 4);
    const longLived = settings(100, 0, 60_000);
    expect(pools.get("h:1", fast)).toBe(pools.get("h:1", fast));
    expect(pools.get("h:1", fast)).not.toBe(pools.get("h:1", slow));
    expect(pools.get("h:1", fast)).not.toBe(pools.get("h:1", longLived));
    expect(pools.addresses()).toEqual(["h:1"]);
    await pools.close();
  });

  it("builds each pool with its settings' keep-alive time, also as the cap on the node's hint", async () => {
    const built: Pool.Options[] = [];
    const pools = new PoolRegistry({
      factory: (origin, options) => {
        built.push(options);
        return new Pool(origin, options);
      },
    });
    pools.get("h:1", settings(1000, 8, 1500));
    pools.get("h:2");
    expect(built.map((o) => [o.keepAliveTimeout, o.keepAliveMaxTimeout, o.connections])).toEqual([
      [1500, 1500, 8],
      [4000, 4000, null],
    ]);
    await pools.close();
  });

  it("closes the pools of nodes no longer retained", async () => {
    const pools = new PoolRegistry();
    const kept = pools.get("127.0.0.1:1");
    const dropped = pools.get("127.0.0.1:2");
    pools.retain(new Map([["127.0.0.1:1", new Set(["1000/0/4000"])]]));
    expect(dropped.closed).toBe(true);
    expect(kept.closed).toBe(false);
    expect(pools.addresses()).toEqual(["127.0.0.1:1"]);
    await pools.close();
    expect(kept.closed).toBe(true);
    expect(() => pools.get("127.0.0.1:1")).toThrow();
  });

  it("moves a node to a changed keep-alive time without dropping the request in flight", async () => {
    const held: ServerResponse[] = [];
    const server = createServer((req, res) => {
      if (req.url === "/hold") held.push(res);
      else res.end("fresh");
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    const pools = new PoolRegistry();
    const before = settings(1000, 0, 4000);
    const after = settings(1000, 0, 30_000);
    try {
      const old = pools.get(address, before);
      const inFlight = request(`http://${address}/hold`, { dispatcher: old });
      await waitUntil(() => held.length === 1);

      // The new snapshot: new requests get a pool with the new time, the old one is closed.
      const fresh = pools.get(address, after);
      expect(fresh).not.toBe(old);
      pools.retain(keys({ [address]: [after] }));
      expect(old.closed).toBe(true);
      expect(fresh.closed).toBe(false);
      expect(pools.get(address, after)).toBe(fresh);

      held[0]!.end("finished");
      const answer = await inFlight;
      expect([answer.statusCode, await answer.body.text()]).toEqual([200, "finished"]);
      const next = await request(`http://${address}/x`, { dispatcher: fresh });
      expect(await next.body.text()).toBe("fresh");
    } finally {
      await pools.close();
      server.closeAllConnections();
      server.close();
    }
  });
});

async function waitUntil(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}
