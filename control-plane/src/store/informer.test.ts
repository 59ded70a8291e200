import { Etcd3 } from "etcd3";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { openEmbeddedStore } from "./embedded-store.js";
import { openEtcdStore } from "./etcd-store.js";
import { Informer, type InformerBatch } from "./informer.js";
import type { Store, WatchHandlers } from "./store.js";

const quiet = { debug() {}, info() {}, warn() {} };

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

let run = 0;
/** A prefix of its own per test, so tests sharing one etcd never see each other's keys. */
function freshPrefix(): string {
  return `/informer-${process.pid}-${++run}/`;
}

async function put(store: Store, key: string, value: string): Promise<number> {
  return (await store.commit([], [{ type: "put", key, value }])).revision;
}

async function del(store: Store, key: string): Promise<number> {
  return (await store.commit([], [{ type: "delete", key }])).revision;
}

/** Holds the next watch the store opens until release(): the store moves on meanwhile. */
function delayedWatch(inner: Store) {
  let release: () => void = () => undefined;
  let held: Promise<void> | undefined = new Promise((resolve) => {
    release = resolve;
  });
  const store: Store = {
    ...inner,
    kind: inner.kind,
    async watch(prefix: string, fromRevision: number, handlers: WatchHandlers) {
      const wait = held;
      held = undefined;
      await wait;
      return inner.watch(prefix, fromRevision, handlers);
    },
  };
  return { store, release: () => release() };
}

function informerOn(store: Store, prefixes: string[]) {
  const batches: InformerBatch[] = [];
  const informer = new Informer({
    store,
    prefixes,
    onBatch: (batch) => batches.push(batch),
    logger: quiet,
    retryMinMs: 1,
    retryMaxMs: 20,
  });
  cleanups.push(() => informer.stop());
  return { informer, batches };
}

function values(informer: Informer, prefix: string): Record<string, string> {
  return Object.fromEntries(
    [...informer.entries(prefix)].map((item) => [item.key.slice(prefix.length), item.value]),
  );
}

const stores: Array<[string, () => Promise<Store>]> = [
  // A short history, so a few writes compact the embedded store as etcd's compaction does.
  ["embedded", () => openEmbeddedStore({ historyLimit: 2 })],
  ["etcd", () => openEtcdStore({ endpoints: [etcd.endpoint], pageSize: 3 })],
];

describe.each(stores)("Informer on the %s store", (_name, open) => {
  async function storeForTest(): Promise<Store> {
    const store = await open();
    cleanups.push(() => store.close());
    return store;
  }

  it("lists in pages, then follows puts, updates and deletes from the list's revision on", async () => {
    const store = await storeForTest();
    const p = freshPrefix();
    for (const name of ["a", "b", "c", "d", "e"]) await put(store, `${p}cfg/${name}`, `${name}1`);
    // Outside the mirrored prefixes: never in the mirror, never in a batch.
    await put(store, `${p}journal/x`, "x");
    const { informer, batches } = informerOn(store, [`${p}cfg/`, `${p}gate`]);

    await informer.start();
    expect(values(informer, p)).toEqual({
      "cfg/a": "a1",
      "cfg/b": "b1",
      "cfg/c": "c1",
      "cfg/d": "d1",
      "cfg/e": "e1",
    });
    expect(batches).toHaveLength(1);
    expect(batches[0]?.replaced).toBe(false);
    expect(batches[0]?.changes.map((c) => c.key).sort()).toHaveLength(5);

    await put(store, `${p}cfg/a`, "a2");
    await del(store, `${p}cfg/b`);
    await put(store, `${p}journal/y`, "y");
    const last = await put(store, `${p}gate`, "closed");
    expect(await informer.waitForRevision(last, 10_000)).toBe(true);

    expect(informer.revision).toBe(last);
    expect(values(informer, p)).toEqual({
      "cfg/a": "a2",
      "cfg/c": "c1",
      "cfg/d": "d1",
      "cfg/e": "e1",
      gate: "closed",
    });
    const changes = batches.slice(1).flatMap((batch) => batch.changes);
    expect(
      changes.map((c) => [c.key.slice(p.length), c.previous?.value, c.current?.value]),
    ).toEqual([
      ["cfg/a", "a1", "a2"],
      ["cfg/b", "b1", undefined],
      ["gate", undefined, "closed"],
    ]);
    expect(informer.get(`${p}cfg/a`)?.modRevision).toBeGreaterThan(
      informer.get(`${p}cfg/a`)?.createRevision ?? Number.POSITIVE_INFINITY,
    );
  });

  it("relists after its watch start was compacted and hands over the difference", async () => {
    const inner = await storeForTest();
    const p = freshPrefix();
    await put(inner, `${p}cfg/keep`, "1");
    await put(inner, `${p}cfg/change`, "1");
    await put(inner, `${p}cfg/drop`, "1");
    const { store, release } = delayedWatch(inner);
    const { informer, batches } = informerOn(store, [`${p}cfg/`]);
    const started = informer.start();
    await vi.waitFor(() => expect(batches).toHaveLength(1));

    // While the watch is not yet open, the store moves on and its history is compacted.
    await put(inner, `${p}cfg/change`, "2");
    await del(inner, `${p}cfg/drop`);
    const last = await put(inner, `${p}cfg/new`, "1");
    await compact(inner, last);
    release();
    await started;

    await vi.waitFor(() => expect(batches.some((batch) => batch.replaced)).toBe(true), {
      timeout: 10_000,
    });
    const replaced = batches.find((batch) => batch.replaced);
    expect(
      replaced?.changes
        .map((c) => [c.key.slice(p.length), c.previous?.value, c.current?.value])
        .sort(),
    ).toEqual([
      ["cfg/change", "1", "2"],
      ["cfg/drop", "1", undefined],
      ["cfg/new", undefined, "1"],
    ]);
    expect(values(informer, p)).toEqual({ "cfg/change": "2", "cfg/keep": "1", "cfg/new": "1" });

    // And the new watch follows later writes.
    const later = await put(inner, `${p}cfg/later`, "1");
    expect(await informer.waitForRevision(later, 10_000)).toBe(true);
    expect(values(informer, p)["cfg/later"]).toBe("1");
  });
});

/** Compacts the store's history up to `revision`: a watch from before it cannot resume. */
async function compact(store: Store, revision: number): Promise<void> {
  if (store.kind === "etcd") {
    const admin = new Etcd3({ hosts: etcd.endpoint });
    try {
      await admin.kv.compact({ revision, physical: true });
    } finally {
      admin.close();
    }
    return;
  }
  // The embedded store compacts as its history outgrows historyLimit (2 here).
  for (let i = 0; i < 3; i++) {
    await store.commit([], [{ type: "put", key: "/elsewhere/filler", value: String(i) }]);
  }
}
