import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ManualScheduler } from "../remediation/manual-scheduler.js";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { ConfigModel } from "./config-model.js";
import { type PublishedSnapshot, SnapshotBuilder } from "./snapshot-builder.js";

let PREFIX = "/clawgate/";
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** One control-plane replica's config path: a model, a builder on it, the API's writes. */
async function replica(store: Store, pacer?: ManualScheduler) {
  const model = new ConfigModel({ store, prefix: PREFIX, logger: quiet });
  const builder = new SnapshotBuilder({
    store,
    prefix: PREFIX,
    logger: quiet,
    model,
    ...(pacer === undefined ? {} : { pacer }),
  });
  const config = new ConfigService(store, PREFIX, { model });
  const published: number[] = [];
  builder.onPublish((p) => published.push(p.version));
  cleanups.push(async () => {
    await builder.stop();
    await config.close();
    await model.stop();
  });
  await builder.start();
  return { model, builder, config, published };
}

/** Writes what replicas write beside the config: shared records, quota counters, the journal. */
async function otherWrites(store: Store): Promise<number> {
  const keys = ["meta/dataplanes/cp-1/dp-1", "quota/acme/60000/1", "journal/0001"];
  let revision = 0;
  for (const key of keys) {
    ({ revision } = await store.commit([], [{ type: "put", key: `${PREFIX}${key}`, value: "x" }]));
  }
  return revision;
}

async function write(
  config: ConfigService,
  kind: "upstreams" | "routes",
  name: string,
  doc?: unknown,
) {
  const result = await config.apply([
    doc === undefined ? { kind, name, delete: true } : { kind, name, document: doc },
  ]);
  if (!result.ok) throw new Error(result.error.message);
  return result.revision;
}

function nextPublish(builder: SnapshotBuilder, version: number): Promise<PublishedSnapshot> {
  return new Promise((resolve) => {
    const now = builder.current();
    if (now !== undefined && now.version >= version) return resolve(now);
    const off = builder.onPublish((published) => {
      if (published.version < version) return;
      off();
      resolve(published);
    });
  });
}

describe("snapshot versions", () => {
  it("publishes no new version for a write to a key no snapshot is built from", async () => {
    const store = await openEmbeddedStore({});
    cleanups.push(() => store.close());
    const pacer = new ManualScheduler();
    const { model, builder, config, published } = await replica(store, pacer);
    const created = await write(config, "upstreams", "agents", {});
    pacer.advance(1_000);
    expect(builder.current()?.version).toBe(created);

    const other = await otherWrites(store);
    expect(await model.waitForRevision(other, 10_000)).toBe(true);
    // No rebuild is even scheduled, and nothing went out: the config is the same one.
    expect(pacer.pending()).toBe(0);
    expect(builder.status()).toMatchObject({ version: created, publishedVersion: created });
    expect(published).toEqual([1, created]);

    // A delete is a change: its version is the revision of the delete, not of later writes.
    const deleted = await write(config, "upstreams", "agents");
    const after = await otherWrites(store);
    expect(await model.waitForRevision(after, 10_000)).toBe(true);
    pacer.advance(1_000);
    expect(builder.current()?.version).toBe(deleted);
    expect(builder.current()?.snapshot.upstreams).toEqual([]);
    expect(published).toEqual([1, created, deleted]);
  });
});

describe("snapshot versions across replicas (etcd)", () => {
  let etcd: EtcdProcess;
  beforeAll(async () => {
    etcd = await startEtcd();
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  // One etcd for both cases, each under a prefix of its own.
  let run = 0;
  beforeEach(() => {
    PREFIX = `/clawgate-${++run}/`;
  });

  async function etcdStore(): Promise<Store> {
    const store = await openEtcdStore({ endpoints: [etcd.endpoint] });
    cleanups.push(() => store.close());
    return store;
  }

  it("numbers one config alike on a replica that watched it change and one started later", async () => {
    const store = await etcdStore();
    const watcher = await replica(store);
    await write(watcher.config, "upstreams", "agents", {});
    await write(watcher.config, "upstreams", "tools", {});
    // The newest change is a delete, which a later list cannot see, followed by other writes.
    const deleted = await write(watcher.config, "upstreams", "tools");
    await otherWrites(store);
    expect((await nextPublish(watcher.builder, deleted)).version).toBe(deleted);

    const late = await replica(await etcdStore());
    expect(late.builder.current()?.version).toBe(deleted);
    expect(late.builder.current()?.snapshot.upstreams.map((u) => u.name)).toEqual(["agents"]);
  });

  it("never gives a config read by a list the version another config had", async () => {
    const store = await etcdStore();
    const watcher = await replica(store);
    const before = await write(watcher.config, "upstreams", "legacy", {});
    await nextPublish(watcher.builder, before);
    // Deleted straight in etcd: no guard key records when, so a list cannot date it.
    const { revision: raw } = await store.commit(
      [],
      [{ type: "delete", key: `${PREFIX}upstreams/legacy` }],
    );
    const other = await otherWrites(store);
    expect((await nextPublish(watcher.builder, raw)).version).toBe(raw);

    const late = await replica(await etcdStore());
    const version = late.builder.current()?.version ?? 0;
    expect(late.builder.current()?.snapshot.upstreams.map((u) => u.name)).not.toContain("legacy");
    // Not `before`, which named the config with legacy: the list's own revision.
    expect(version).toBe(other);
  });
});
