import { randomBytes } from "node:crypto";
import type { Snapshot } from "@clawgate/proto";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Journal } from "../journal/journal.js";
import { ConfigService } from "../resources/config-service.js";
import { SnapshotBuilder } from "../snapshot/snapshot-builder.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { type RegistryDeletion, RegistryExpiryWatcher } from "./expiry-watcher.js";
import { NodeRegistry } from "./node-registry.js";

/** Lease expiry is real time: etcd checks leases about every 500 ms. */
const TEST_TIMEOUT_MS = 20_000;
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

/** One control plane's registry side: builder, journal, registry, expiry watcher. */
async function controlPlane(store: Store, prefix: string, name: string) {
  const builder = new SnapshotBuilder({
    store,
    prefix,
    logger: silent,
    coalesceMs: 5,
    maxDelayMs: 50,
  });
  const journal = new Journal({ store, prefix });
  const registry = new NodeRegistry({ store, prefix });
  const watcher = new RegistryExpiryWatcher({
    store,
    prefix,
    journal,
    source: `control-plane/${name}`,
    logger: silent,
    retryMs: 10,
  });
  await builder.start();
  await watcher.start();
  cleanups.push(async () => {
    await watcher.stop();
    await builder.stop();
  });
  return { builder, journal, registry, watcher };
}

async function setup(openStore: () => Promise<Store>) {
  const store = await openStore();
  cleanups.push(() => store.close());
  // A fresh prefix per test keeps tests on the shared etcd apart.
  const prefix = `/t-${randomBytes(4).toString("hex")}/`;
  const config = new ConfigService(store, prefix);
  const seeded = await config.apply([
    { kind: "upstreams", name: "agents", document: { nodes: [{ address: "127.0.0.1:9001" }] } },
  ]);
  expect(seeded.ok).toBe(true);
  return { store, prefix, config, cp: await controlPlane(store, prefix, "cp-1") };
}

function nodesOf(snapshot: Snapshot, upstream = "agents"): string[] {
  const found = snapshot.upstreams.find((u) => u.name === upstream);
  return (found?.nodes ?? []).map((node) => `${node.address}:${node.source}`);
}

/** Resolves with the first published snapshot `accept` takes, the current one included. */
function published(builder: SnapshotBuilder, accept: (snapshot: Snapshot) => boolean) {
  const now = builder.current();
  if (now !== undefined && accept(now.snapshot)) return Promise.resolve(now.snapshot);
  return new Promise<Snapshot>((resolve) => {
    const off = builder.onPublish(({ snapshot }) => {
      if (!accept(snapshot)) return;
      off();
      resolve(snapshot);
    });
  });
}

function deletion(watcher: RegistryExpiryWatcher, id: string): Promise<RegistryDeletion> {
  return new Promise((resolve) => {
    const off = watcher.onDeletion((gone) => {
      if (gone.id !== id) return;
      off();
      resolve(gone);
    });
  });
}

const stores: Array<[string, () => Promise<Store>]> = [
  ["embedded", () => openEmbeddedStore({})],
  ["etcd", () => openEtcdStore({ endpoints: [etcd.endpoint] })],
];

describe.each(stores)("node registry on the %s store", (_kind, openStore) => {
  it(
    "keeps a renewed node, drops one that stops renewing and journals its expiry",
    async () => {
      const { cp } = await setup(openStore);
      const lapsed = deletion(cp.watcher, "lapse");

      expect(
        await cp.registry.register("agents", "stay", { address: "127.0.0.1:9005", ttlSeconds: 1 }),
      ).toMatchObject({ ok: true, action: "created" });
      expect(
        await cp.registry.register("agents", "lapse", {
          address: "127.0.0.1:9006",
          weight: 2,
          ttlSeconds: 1,
        }),
      ).toMatchObject({ ok: true, action: "created" });
      const both = await published(cp.builder, (s) => nodesOf(s).length === 3);
      // Document nodes first, then registered ones by id ("lapse" < "stay").
      expect(nodesOf(both)).toEqual([
        "127.0.0.1:9001:config",
        "127.0.0.1:9006:registry",
        "127.0.0.1:9005:registry",
      ]);

      // Renew "stay" well inside its 1 s TTL; "lapse" never renews.
      const renewals: string[] = [];
      const renewing = setInterval(() => {
        void cp.registry
          .register("agents", "stay", { address: "127.0.0.1:9005", ttlSeconds: 1 })
          .then((result) => renewals.push(result.ok ? result.action : result.error.code));
      }, 200);
      try {
        const without = await published(
          cp.builder,
          (s) => !nodesOf(s).includes("127.0.0.1:9006:registry"),
        );
        // "stay" was renewed while "lapse" ran out its TTL, and outlived it (the TTL itself is
        // etcd's to keep: no elapsed time is compared here).
        expect(renewals, "renewals before the other node lapsed").toContain("renewed");
        expect(nodesOf(without)).toEqual(["127.0.0.1:9001:config", "127.0.0.1:9005:registry"]);

        expect(await lapsed).toMatchObject({ upstream: "agents", verdict: "expired" });
        const events = await cp.journal.list({ upstream: "agents" });
        expect(events).toHaveLength(1);
        expect(events[0]).toMatchObject({
          upstream: "agents",
          node: "127.0.0.1:9006",
          action: "registry_expiry",
          source: "control-plane/cp-1",
        });
        expect(events[0]?.evidence).toContain("lapse");
      } finally {
        clearInterval(renewing);
      }
      // Renewals only refreshed the lease: no writes, so no snapshots of their own.
      expect(renewals.length).toBeGreaterThan(0);
      expect(new Set(renewals)).toEqual(new Set(["renewed"]));

      // An explicit deregistration also leaves the snapshot, but is not an expiry.
      const gone = deletion(cp.watcher, "stay");
      expect((await cp.registry.deregister("agents", "stay")).ok).toBe(true);
      const after = await published(cp.builder, (s) => nodesOf(s).length === 1);
      expect(nodesOf(after)).toEqual(["127.0.0.1:9001:config"]);
      expect(await gone).toMatchObject({ verdict: "deregistered" });
      expect((await cp.journal.list()).filter((e) => e.action === "registry_expiry")).toHaveLength(
        1,
      );
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "refuses a registration for a missing upstream and ignores orphans of a deleted one",
    async () => {
      const { config, cp } = await setup(openStore);
      expect(await cp.registry.register("nope", "n1", { address: "127.0.0.1:9005" })).toMatchObject(
        { ok: false, error: { code: "CLAWGATE_NOT_FOUND", status: 404 } },
      );

      await cp.registry.register("agents", "n1", { address: "127.0.0.1:9005", ttlSeconds: 60 });
      await published(cp.builder, (s) => nodesOf(s).includes("127.0.0.1:9005:registry"));

      expect((await config.apply([{ kind: "upstreams", name: "agents", delete: true }])).ok).toBe(
        true,
      );
      const none = await published(cp.builder, (s) => s.upstreams.length === 0);
      expect(none.upstreams).toEqual([]);
      // The orphan's renewal is refused, so its lease runs out.
      expect(
        await cp.registry.register("agents", "n1", { address: "127.0.0.1:9005", ttlSeconds: 60 }),
      ).toMatchObject({ ok: false, error: { code: "CLAWGATE_NOT_FOUND" } });
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "journals an expiry once when two control planes watch",
    async () => {
      const { store, prefix, cp } = await setup(openStore);
      const second = await controlPlane(store, prefix, "cp-2");
      const seenByFirst = deletion(cp.watcher, "lapse");
      const seenBySecond = deletion(second.watcher, "lapse");

      await cp.registry.register("agents", "lapse", { address: "127.0.0.1:9006", ttlSeconds: 1 });
      const verdicts = [(await seenByFirst).verdict, (await seenBySecond).verdict].sort();
      expect(verdicts).toEqual(["already-journaled", "expired"]);
      const events = await second.journal.list();
      expect(events.map((e) => e.action)).toEqual(["registry_expiry"]);
    },
    TEST_TIMEOUT_MS,
  );
});
