import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { compactStore, holdNextWatch } from "../testing/compaction.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { openEmbeddedStore } from "./embedded-store.js";
import { openEtcdStore } from "./etcd-store.js";
import { Informer, type InformerBatch } from "./informer.js";
import type { Store } from "./store.js";

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

function informerOn(store: Store, prefixes: string[], keepValues = true) {
  const batches: InformerBatch[] = [];
  const informer = new Informer({
    store,
    prefixes,
    keepValues,
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

  it("without keepValues, hands values over in batches and keeps only revisions", async () => {
    const inner = await storeForTest();
    const p = freshPrefix();
    const first = await put(inner, `${p}big/a`, "a1");
    const { store, release, requested } = holdNextWatch(inner);
    const { informer, batches } = informerOn(store, [`${p}big/`], false);
    const started = informer.start();
    await requested;
    const changed = await put(inner, `${p}big/a`, "a2");
    // Past the watch's start revision, so etcd's compaction removes it too.
    await compact(inner, await put(inner, `${p}elsewhere`, "x"));
    release();
    await started;
    await vi.waitFor(() => expect(batches.some((batch) => batch.replaced)).toBe(true), {
      timeout: 10_000,
    });
    const later = await put(inner, `${p}big/b`, "b1");
    expect(await informer.waitForRevision(later, 10_000)).toBe(true);

    // Each change names the revision it happened at; a relist, the list's.
    expect(
      batches.flatMap((batch) =>
        batch.changes.map((c) => [batch.replaced, c.current?.value, c.revision]),
      ),
    ).toEqual([
      [false, "a1", first],
      [true, "a2", expect.any(Number)],
      [false, "b1", later],
    ]);
    expect(batches[1]?.changes[0]?.revision).toBeGreaterThanOrEqual(changed);
    expect(values(informer, p)).toEqual({ "big/a": "", "big/b": "" });
    expect(informer.get(`${p}big/b`)?.modRevision).toBe(later);
  });

  it("relists after its watch start was compacted and hands over the difference", async () => {
    const inner = await storeForTest();
    const p = freshPrefix();
    await put(inner, `${p}cfg/keep`, "1");
    await put(inner, `${p}cfg/change`, "1");
    await put(inner, `${p}cfg/drop`, "1");
    const { store, release } = holdNextWatch(inner);
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

function compact(store: Store, revision: number): Promise<void> {
  return compactStore(store, revision, { etcdEndpoint: etcd.endpoint, embeddedHistoryLimit: 2 });
}
