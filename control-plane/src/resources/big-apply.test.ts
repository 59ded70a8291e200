import { randomBytes } from "node:crypto";
import { RESOURCE_KINDS } from "@clawgate/proto";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SnapshotBuilder } from "../snapshot/snapshot-builder.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { probeWatch } from "../store/store-contract.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { applyGateKey, applyUndoPrefix } from "./apply-gate.js";
import { ConfigService, type ResourceChange } from "./config-service.js";

// etcd exactly as installed: its defaults are --max-txn-ops 128 and --max-request-bytes 1.5 MiB,
// which is what a big apply has to fit (startEtcd passes no flag that raises them).
let etcd: EtcdProcess;
let store: Store;

beforeAll(async () => {
  etcd = await startEtcd();
  store = await openEtcdStore({ endpoints: [etcd.endpoint] });
});
afterAll(async () => {
  await store?.close();
  await etcd?.stop();
});

const silent = pino({ level: "silent" });

function freshPrefix(): string {
  return `/t-${randomBytes(4).toString("hex")}/`;
}

/**
 * `count` resources, upstreams first then the routes that use them, so every prefix of the
 * list is itself consistent: only the gate can keep a builder from publishing part of it.
 * `nodes` pads each upstream (110 nodes make about 5 KB stored).
 */
function resources(count: number, tag: string, nodes = 3): ResourceChange[] {
  const pairs = Math.floor(count / 2);
  const upstreams: ResourceChange[] = [];
  const routes: ResourceChange[] = [];
  for (let i = 0; i < pairs; i++) {
    upstreams.push({
      kind: "upstreams",
      name: `u-${i}`,
      document: {
        nodes: Array.from({ length: nodes }, (_, n) => ({
          address: `10.${(i >> 8) & 255}.${i & 255}.${n + 1}:8080`,
          weight: 1 + (n % 5),
        })),
      },
    });
    routes.push({
      kind: "routes",
      name: `r-${i}`,
      document: { match: { pathPrefix: `/${tag}/${i}` }, upstream: `u-${i}` },
    });
  }
  return [...upstreams, ...routes];
}

/** Every config document under `prefix` by key, to prove a failed apply changed nothing. */
async function configDump(prefix: string): Promise<Record<string, string>> {
  const read = await store.range(RESOURCE_KINDS.map((kind) => `${prefix}${kind}/`));
  return Object.fromEntries(read.items.map((item) => [item.key, item.value]));
}

async function coordinationKeys(prefix: string): Promise<string[]> {
  const read = await store.range([
    applyGateKey(prefix),
    applyUndoPrefix(prefix),
    `${prefix}meta/apply-owner/`,
  ]);
  return read.items.map((item) => item.key);
}

describe("apply bigger than one etcd transaction", () => {
  it("applies 3,000 resources in one call, and GET sees them all afterwards", async () => {
    const prefix = freshPrefix();
    const config = new ConfigService(store, prefix);
    const changes = resources(3_000, "a");

    const started = performance.now();
    const result = await config.apply(changes);
    const took = performance.now() - started;
    console.log(`apply of ${changes.length} resources took ${took.toFixed(0)} ms`);

    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.results).toHaveLength(3_000);
    expect(result.results.every((item) => item.action === "created")).toBe(true);
    const routes = await config.list("routes");
    expect(routes.ok && routes.items.length).toBe(1_500);
    const one = await config.get("routes", "r-1499");
    expect(one.ok && one.resource.revision).toBe(
      result.results.find((item) => item.name === "r-1499")?.revision,
    );
    expect(await coordinationKeys(prefix)).toEqual([]);

    // The same set again changes nothing; with prune and a smaller set, the rest is deleted.
    const again = await config.apply(changes);
    expect(again.ok && again.results.every((item) => item.action === "unchanged")).toBe(true);
    const kept = changes.filter((change) => change.name.endsWith("-7"));
    const dry = await config.apply(kept, { prune: true, dryRun: true });
    expect(dry.ok && dry.results.filter((item) => item.action === "deleted")).toHaveLength(2_998);
    expect(Object.keys(await configDump(prefix))).toHaveLength(3_000);
    const pruned = await config.apply(kept, { prune: true });
    expect(pruned.ok).toBe(true);
    expect(Object.keys(await configDump(prefix)).sort()).toEqual([
      `${prefix}routes/r-7`,
      `${prefix}upstreams/u-7`,
    ]);
  }, 120_000);

  it("refuses the whole apply when its last resource breaks a reference", async () => {
    const prefix = freshPrefix();
    const config = new ConfigService(store, prefix);
    expect((await config.apply(resources(10, "seed"))).ok).toBe(true);
    const before = await configDump(prefix);
    const changes = resources(3_000, "b");
    changes.push({
      kind: "routes",
      name: "dangling",
      document: { match: { pathPrefix: "/dangling" }, upstream: "missing" },
    });

    const result = await config.apply(changes);

    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.code).toBe("CLAWGATE_REFERENCE_CONFLICT");
    expect(result.error.message).toContain("route dangling names upstream missing");
    expect(await configDump(prefix)).toEqual(before);
  }, 120_000);

  it("rolls back every written batch when the apply fails half-way", async () => {
    const prefix = freshPrefix();
    const seed = resources(200, "seed");
    expect((await new ConfigService(store, prefix).apply(seed)).ok).toBe(true);
    const before = await configDump(prefix);
    const config = new ConfigService(store, prefix, {
      stagedHooks: {
        beforeBatch(index) {
          if (index === 5) throw new Error("injected failure before batch 6");
        },
      },
    });
    // Updates the seeded resources and creates new ones, so rollback must restore and delete.
    const changes = resources(3_000, "c");

    const result = await config.apply(changes);

    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.code).toBe("CLAWGATE_STORE_UNAVAILABLE");
    expect(result.error.message).toContain("injected failure before batch 6");
    expect(result.error.message).toContain("rolled back");
    expect(await configDump(prefix)).toEqual(before);
    expect(await coordinationKeys(prefix)).toEqual([]);
    // And the gate is open again for the next writer.
    expect((await config.apply([{ kind: "breakers", name: "b", document: {} }])).ok).toBe(true);
  }, 120_000);

  it("rolls back an apply whose control plane crashed half-way, once its lease runs out", async () => {
    const prefix = freshPrefix();
    const seed = resources(20, "seed");
    const other = new ConfigService(store, prefix);
    expect((await other.apply(seed)).ok).toBe(true);
    const before = await configDump(prefix);
    const seedRoute = await other.get("routes", "r-3");

    // The dying control plane has its own etcd connection, closed half-way as a crash closes
    // it: nothing renews its lease any more (a live owner's timer would keep it, however long
    // the hook below waits), and it writes nothing more.
    const dyingStore = await openEtcdStore({ endpoints: [etcd.endpoint] });
    let frozen!: () => void;
    let reachedBatch!: () => void;
    const atBatch = new Promise<void>((resolve) => {
      reachedBatch = resolve;
    });
    const dying = new ConfigService(dyingStore, prefix, {
      applyLeaseTtlSeconds: 1,
      stagedHooks: {
        async beforeBatch(index) {
          if (index !== 3) return;
          await dyingStore.close();
          reachedBatch();
          await new Promise<void>((resolve) => {
            frozen = resolve;
          });
        },
      },
    });
    const owners = await probeWatch(store, `${prefix}meta/apply-owner/`, 0);
    const applying = dying.apply(resources(3_000, "d"));
    await atBatch;

    // Meanwhile readers see the config as it was, and writers are told to wait.
    expect(await other.get("routes", "r-3")).toEqual(seedRoute);
    const listed = await other.list("routes");
    expect(listed.ok && listed.items.length).toBe(10);
    const blocked = await other.apply([{ kind: "breakers", name: "b", document: {} }]);
    expect(blocked.ok === false && blocked.error.code).toBe("CLAWGATE_STORE_CONFLICT");
    expect(blocked.ok === false && blocked.error.message).toContain("in progress");
    expect(await other.recoverAbandonedApply()).toBe("running");

    await owners.waitFor(
      (events) => events.some((event) => event.type === "delete"),
      "the owner lease to expire",
    );
    await owners.close();
    expect(await other.recoverAbandonedApply()).toBe("rolled-back");
    expect(await configDump(prefix)).toEqual(before);

    frozen();
    const result = await applying;
    expect(result.ok).toBe(false);
    expect(await configDump(prefix)).toEqual(before);
    expect(await coordinationKeys(prefix)).toEqual([]);
    await Promise.all([dying.close(), other.close()]);
  }, 120_000);

  it("never lets a snapshot builder publish part of an apply", async () => {
    const prefix = freshPrefix();
    const config = new ConfigService(store, prefix);
    expect((await config.apply(resources(2, "seed"))).ok).toBe(true);
    const builder = new SnapshotBuilder({ store, prefix, logger: silent });
    const published: { version: number; routes: number; upstreams: number }[] = [];
    let onVersion: ((version: number) => void) | undefined;
    builder.onPublish((snapshot) => {
      const { counts } = builder.status();
      published.push({
        version: snapshot.version,
        routes: counts.routes,
        upstreams: counts.upstreams,
      });
      onVersion?.(snapshot.version);
    });
    await builder.start();
    try {
      const result = await config.apply(resources(3_000, "e"));
      expect(result.ok).toBe(true);
      if (!result.ok) return;
      if ((builder.current()?.version ?? 0) < result.revision) {
        await new Promise<void>((resolve) => {
          onVersion = (version) => {
            if (version >= result.revision) resolve();
          };
        });
      }
      expect(published.length).toBeGreaterThan(1);
      for (const counts of published) {
        expect([1, 1_500]).toContain(counts.routes);
        expect(counts.upstreams).toBe(counts.routes);
      }
      expect(published.at(-1)).toMatchObject({ routes: 1_500, upstreams: 1_500 });
    } finally {
      await builder.stop();
    }
  }, 120_000);

  it("applies 20,000 resources (about 50 MB) in one call", async () => {
    const prefix = freshPrefix();
    const config = new ConfigService(store, prefix);
    const changes = resources(20_000, "f", 110);
    const bytes = Buffer.byteLength(JSON.stringify(changes));

    const started = performance.now();
    const result = await config.apply(changes);
    const took = performance.now() - started;
    console.log(
      `apply of ${changes.length} resources (${(bytes / 1e6).toFixed(1)} MB of JSON) took ${took.toFixed(0)} ms`,
    );

    expect(result.ok).toBe(true);
    const listed = await config.list("upstreams");
    expect(listed.ok && listed.items.length).toBe(10_000);
  }, 300_000);
});
