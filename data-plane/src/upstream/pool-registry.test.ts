import { describe, expect, it } from "vitest";
import { PoolRegistry } from "./pool-registry.js";

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

  it("keeps separate pools for different connect settings of one node", async () => {
    const pools = new PoolRegistry();
    const fast = { key: "100/0", connectTimeoutMs: 100, connections: 0 };
    const slow = { key: "5000/4", connectTimeoutMs: 5000, connections: 4 };
    expect(pools.get("h:1", fast)).toBe(pools.get("h:1", fast));
    expect(pools.get("h:1", fast)).not.toBe(pools.get("h:1", slow));
    expect(pools.addresses()).toEqual(["h:1"]);
    await pools.close();
  });

  it("closes the pools of nodes no longer retained", async () => {
    const pools = new PoolRegistry();
    const kept = pools.get("127.0.0.1:1");
    const dropped = pools.get("127.0.0.1:2");
    pools.retain(new Set(["127.0.0.1:1"]));
    expect(dropped.closed).toBe(true);
    expect(kept.closed).toBe(false);
    expect(pools.addresses()).toEqual(["127.0.0.1:1"]);
    await pools.close();
    expect(kept.closed).toBe(true);
    expect(() => pools.get("127.0.0.1:1")).toThrow();
  });
});
