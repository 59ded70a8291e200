import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { NodeRegistry } from "./node-registry.js";
import { registryGoneKey, registryKey } from "./registry-key.js";

const PREFIX = "/clawgate/";
const T0 = Date.parse("2025-03-01T12:00:00.000Z");

let store: Store;
let config: ConfigService;
let now: number;

beforeEach(async () => {
  store = await openEmbeddedStore({});
  config = new ConfigService(store, PREFIX);
  now = T0;
  const seeded = await config.apply([
    {
      kind: "upstreams",
      name: "agents",
      document: { nodes: [{ address: "127.0.0.1:9001", weight: 3 }] },
    },
  ]);
  expect(seeded.ok).toBe(true);
});
afterEach(async () => {
  await store.close();
});

function registry(over: Store = store): NodeRegistry {
  return new NodeRegistry({ store: over, prefix: PREFIX, clock: () => now });
}

/** Wraps the store to record every commit and lease call. */
function spying() {
  const calls: string[] = [];
  const commits: { compares: unknown[]; operations: unknown[] }[] = [];
  const spy: Store = {
    ...store,
    kind: store.kind,
    commit: async (compares, operations) => {
      calls.push("commit");
      commits.push({ compares: [...compares], operations: [...operations] });
      return store.commit(compares, operations);
    },
    grantLease: async (ttl) => {
      calls.push(`grant:${ttl}`);
      return store.grantLease(ttl);
    },
    refreshLease: async (lease) => {
      calls.push("refresh");
      return store.refreshLease(lease);
    },
    revokeLease: async (lease) => {
      calls.push("revoke");
      return store.revokeLease(lease);
    },
  };
  return { spy, calls, commits };
}

describe("NodeRegistry", () => {
  it("stores a registration under a lease, guarded by the upstream's key in the same commit", async () => {
    const { spy, calls, commits } = spying();
    const result = await registry(spy).register("agents", "node-1", {
      address: "127.0.0.1:9005",
      ttlSeconds: 7,
    });
    expect(result).toMatchObject({
      ok: true,
      action: "created",
      expiresInSeconds: 7,
      node: { upstream: "agents", id: "node-1", address: "127.0.0.1:9005", weight: 1 },
    });
    expect(calls).toEqual(["grant:7", "commit"]);
    const upstream = await store.get(`${PREFIX}upstreams/agents`);
    expect(commits[0]?.compares).toEqual([
      { key: `${PREFIX}upstreams/agents`, modRevision: upstream?.modRevision },
      { key: registryKey(PREFIX, "agents", "node-1"), modRevision: 0 },
    ]);
    const kv = await store.get(registryKey(PREFIX, "agents", "node-1"));
    expect(kv?.lease).toBeDefined();
    expect(JSON.parse(kv?.value ?? "null")).toEqual({
      address: "127.0.0.1:9005",
      weight: 1,
      ttlSeconds: 7,
      registeredAt: "2025-03-01T12:00:00.000Z",
    });
  });

  it("renews by refreshing the same lease without a write; a changed weight rewrites the key on it", async () => {
    const { spy, calls } = spying();
    const nodes = registry(spy);
    const body = { address: "127.0.0.1:9005", weight: 2, ttlSeconds: 5 };
    const created = await nodes.register("agents", "node-1", body);
    const before = await store.get(registryKey(PREFIX, "agents", "node-1"));
    calls.length = 0;

    now += 3_000;
    const renewed = await nodes.register("agents", "node-1", body);
    expect(renewed).toMatchObject({ ok: true, action: "renewed", revision: before?.modRevision });
    expect(calls).toEqual(["refresh"]);
    expect(await store.get(registryKey(PREFIX, "agents", "node-1"))).toEqual(before);

    calls.length = 0;
    const updated = await nodes.register("agents", "node-1", { ...body, weight: 4 });
    expect(updated).toMatchObject({ ok: true, action: "updated", node: { weight: 4 } });
    expect(calls).toEqual(["refresh", "commit"]);
    const after = await store.get(registryKey(PREFIX, "agents", "node-1"));
    expect(after?.lease).toBe(before?.lease);
    expect(after?.modRevision).toBeGreaterThan(before?.modRevision ?? 0);
    // registeredAt is when the node first came, not when it last changed.
    if (created.ok && updated.ok) expect(updated.node.registeredAt).toBe(created.node.registeredAt);
  });

  it("moves to a new lease when the TTL changes, revoking the old one", async () => {
    const nodes = registry();
    await nodes.register("agents", "node-1", { address: "127.0.0.1:9005", ttlSeconds: 5 });
    const first = await store.get(registryKey(PREFIX, "agents", "node-1"));
    const changed = await nodes.register("agents", "node-1", {
      address: "127.0.0.1:9005",
      ttlSeconds: 60,
    });
    expect(changed).toMatchObject({ ok: true, action: "updated", expiresInSeconds: 60 });
    const second = await store.get(registryKey(PREFIX, "agents", "node-1"));
    expect(second?.lease).toBeDefined();
    expect(second?.lease).not.toBe(first?.lease);
    expect(await store.refreshLease(first?.lease ?? "")).toBe(false);
  });

  it("grants a new lease when renewing finds the old one expired", async () => {
    await registry().register("agents", "node-1", { address: "127.0.0.1:9005", ttlSeconds: 5 });
    const first = await store.get(registryKey(PREFIX, "agents", "node-1"));
    // etcd can answer a keepalive with "expired" a moment before it deletes the lease's keys.
    const lapsed: Store = {
      ...store,
      kind: store.kind,
      refreshLease: async (lease) => (lease === first?.lease ? false : store.refreshLease(lease)),
    };
    const renewed = await registry(lapsed).register("agents", "node-1", {
      address: "127.0.0.1:9005",
      ttlSeconds: 5,
    });
    expect(renewed).toMatchObject({ ok: true, action: "updated" });
    const second = await store.get(registryKey(PREFIX, "agents", "node-1"));
    expect(second?.lease).toBeDefined();
    expect(second?.lease).not.toBe(first?.lease);
    expect(await store.refreshLease(second?.lease ?? "")).toBe(true);
  });

  it("answers 404 for a missing upstream and writes nothing", async () => {
    const before = await store.range("");
    const result = await registry().register("nope", "node-1", { address: "127.0.0.1:9005" });
    expect(result).toMatchObject({
      ok: false,
      error: { code: "CLAWGATE_NOT_FOUND", status: 404, message: "upstream nope not found" },
    });
    expect(await store.range("")).toEqual(before);
  });

  it("re-checks the upstream when it is deleted between the read and the commit", async () => {
    let commits = 0;
    const racing: Store = {
      ...store,
      kind: store.kind,
      commit: async (compares, operations) => {
        commits++;
        if (commits === 1) {
          const deleted = await config.apply([{ kind: "upstreams", name: "agents", delete: true }]);
          expect(deleted.ok).toBe(true);
        }
        return store.commit(compares, operations);
      },
    };
    const result = await registry(racing).register("agents", "node-1", {
      address: "127.0.0.1:9005",
    });
    expect(result).toMatchObject({ ok: false, error: { code: "CLAWGATE_NOT_FOUND" } });
    expect(await store.get(registryKey(PREFIX, "agents", "node-1"))).toBeUndefined();
  });

  it("validates names and the body", async () => {
    const nodes = registry();
    expect(await nodes.register("agents", "Bad_Id", { address: "127.0.0.1:1" })).toMatchObject({
      ok: false,
      error: { code: "CLAWGATE_INVALID_NAME" },
    });
    const bad = await nodes.register("agents", "n", { address: "nowhere", ttlSeconds: 0 });
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.error.code).toBe("CLAWGATE_INVALID_REQUEST");
    expect(
      [...new Set((bad.error.details as { path: string }[]).map((d) => d.path))].sort(),
    ).toEqual(["address", "ttlSeconds"]);
    expect(
      await nodes.register("agents", "n", { address: "127.0.0.1:1", ttlSeconds: 3_601 }),
    ).toMatchObject({ ok: false, error: { code: "CLAWGATE_INVALID_REQUEST" } });
  });

  it("deregisters by deleting the key with a 'deregistered' marker in one commit, then revokes", async () => {
    const { spy, calls, commits } = spying();
    const nodes = registry(spy);
    await nodes.register("agents", "node-1", { address: "127.0.0.1:9005" });
    const kv = await store.get(registryKey(PREFIX, "agents", "node-1"));
    calls.length = 0;
    commits.length = 0;

    const result = await nodes.deregister("agents", "node-1");
    expect(result.ok).toBe(true);
    expect(calls).toEqual(["commit", "revoke"]);
    expect(commits[0]?.operations).toEqual([
      { type: "delete", key: registryKey(PREFIX, "agents", "node-1") },
      {
        type: "put",
        key: registryGoneKey(PREFIX, "agents", "node-1"),
        value: JSON.stringify({ reason: "deregistered" }),
      },
    ]);
    expect(await store.get(registryKey(PREFIX, "agents", "node-1"))).toBeUndefined();
    expect(await store.refreshLease(kv?.lease ?? "")).toBe(false);
    expect(await nodes.deregister("agents", "node-1")).toMatchObject({
      ok: false,
      error: { code: "CLAWGATE_NOT_FOUND" },
    });
  });

  it("lists document and registered nodes with their source, the document winning a clash", async () => {
    const nodes = registry();
    await nodes.register("agents", "b-node", { address: "127.0.0.1:9006", ttlSeconds: 10 });
    await nodes.register("agents", "a-clash", { address: "127.0.0.1:9001", weight: 7 });
    now += 4_000;
    const list = await nodes.list("agents");
    expect(list.ok).toBe(true);
    if (!list.ok) return;
    expect(list.nodes).toEqual([
      { address: "127.0.0.1:9001", weight: 3, source: "config", active: true },
      {
        address: "127.0.0.1:9006",
        weight: 1,
        source: "registry",
        id: "b-node",
        active: true,
        ttlSeconds: 10,
        expiresInSeconds: 6,
        registeredAt: "2025-03-01T12:00:00.000Z",
      },
      {
        address: "127.0.0.1:9001",
        weight: 7,
        source: "registry",
        id: "a-clash",
        active: false,
        ttlSeconds: 10,
        expiresInSeconds: 6,
        registeredAt: "2025-03-01T12:00:00.000Z",
      },
    ]);
    // Another control plane's registry has not seen these leases: remaining TTL unknown.
    const other = await registry().list("agents");
    if (other.ok) expect(other.nodes[1]?.expiresInSeconds).toBeNull();
    expect(await nodes.list("nope")).toMatchObject({
      ok: false,
      error: { code: "CLAWGATE_NOT_FOUND" },
    });
  });
});
