import { randomBytes } from "node:crypto";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Journal } from "../journal/journal.js";
import { ConfigService } from "../resources/config-service.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { compactStore, holdNextWatch } from "../testing/compaction.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { type RegistryDeletion, RegistryExpiryWatcher } from "./expiry-watcher.js";
import { NodeRegistry } from "./node-registry.js";
import { registryKey } from "./registry-key.js";

const silent = pino({ level: "silent" });

let etcd: EtcdProcess;
beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function deletion(watcher: RegistryExpiryWatcher, id: string): Promise<RegistryDeletion> {
  return new Promise((resolve) => {
    const off = watcher.onDeletion((gone) => {
      if (gone.id !== id) return;
      off();
      resolve(gone);
    });
  });
}

/** What a lease running out does to a registered node: its key goes, with no marker. */
async function expire(store: Store, prefix: string, id: string): Promise<void> {
  const kv = await store.get(registryKey(prefix, "agents", id));
  if (kv?.lease === undefined) throw new Error(`node ${id} has no lease`);
  await store.revokeLease(kv.lease);
}

describe("registry expiry watcher after etcd compacts its watch away", () => {
  it("journals the expiry in the gap once, tells a deregistration apart, and follows new nodes", async () => {
    const store = await openEtcdStore({ endpoints: [etcd.endpoint] });
    cleanups.push(() => store.close());
    const prefix = `/expiry-${randomBytes(4).toString("hex")}/`;
    const seeded = await new ConfigService(store, prefix).apply([
      { kind: "upstreams", name: "agents", document: { nodes: [{ address: "127.0.0.1:9001" }] } },
    ]);
    expect(seeded.ok).toBe(true);
    const registry = new NodeRegistry({ store, prefix });
    const journal = new Journal({ store, prefix });
    for (const [id, port] of [
      ["lapse", 9002],
      ["leave", 9003],
    ] as const) {
      const registered = await registry.register("agents", id, {
        address: `127.0.0.1:${port}`,
        ttlSeconds: 60,
      });
      expect(registered.ok).toBe(true);
    }

    const held = holdNextWatch(store);
    const watcher = new RegistryExpiryWatcher({
      store: held.store,
      prefix,
      journal,
      source: "control-plane/cp-1",
      logger: silent,
      retryMs: 10,
    });
    cleanups.push(() => watcher.stop());
    const lapsed = deletion(watcher, "lapse");
    const left = deletion(watcher, "leave");
    const started = watcher.start();
    await held.requested;

    // Listed, not yet watching: one node expires, one deregisters, one arrives, and etcd
    // compacts all of it away before the watch opens.
    await expire(store, prefix, "lapse");
    expect((await registry.deregister("agents", "leave")).ok).toBe(true);
    const late = await registry.register("agents", "late", {
      address: "127.0.0.1:9004",
      ttlSeconds: 60,
    });
    expect(late.ok).toBe(true);
    const now = await store.get(registryKey(prefix, "agents", "late"));
    await compactStore(store, now?.modRevision ?? 0, { etcdEndpoint: etcd.endpoint });
    held.release();
    await started;

    expect(await lapsed).toMatchObject({ upstream: "agents", verdict: "expired" });
    expect(await left).toMatchObject({ upstream: "agents", verdict: "deregistered" });

    // The re-read taught the watcher the node that arrived in the gap: its expiry names it.
    const lateLapsed = deletion(watcher, "late");
    await expire(store, prefix, "late");
    expect(await lateLapsed).toMatchObject({ verdict: "expired" });
    const events = await journal.list({ upstream: "agents" });
    expect(events.map((event) => [event.action, event.node]).sort()).toEqual([
      ["registry_expiry", "127.0.0.1:9002"],
      ["registry_expiry", "127.0.0.1:9004"],
    ]);
  }, 20_000);
});
