import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configGuardKey } from "../resources/config-guard.js";
import { ConfigService, type ResourceChange } from "../resources/config-service.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { KeyValue, Store } from "../store/store.js";
import { compactStore } from "../testing/compaction.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { ConfigHistory, historyPrefix, historyUndoPrefix } from "./config-history.js";

/** The test etcd seen with 4000-byte transactions, so a 20-resource write is "big". */
function smallCommits(): Store {
  return Object.assign(Object.create(store) as Store, {
    txnLimits: { maxOps: 128, maxBytes: 4000 },
  });
}

// Real etcd: its compaction is what removes MVCC history, and its 128-operation transactions
// are what make an apply of 300 resources staged.
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

/** The test etcd, noting every key whose value a read brought back. */
function readsNoted(): { store: Store; valued: Set<string> } {
  const valued = new Set<string>();
  const note = (items: readonly KeyValue[]) => {
    for (const kv of items) if (kv.value !== "") valued.add(kv.key);
  };
  const noted = Object.assign(Object.create(store) as Store, {
    range: async (...args: Parameters<Store["range"]>) => {
      const read = await store.range(...args);
      note(read.items);
      return read;
    },
    get: async (...args: Parameters<Store["get"]>) => {
      const kv = await store.get(...args);
      if (kv !== undefined) note([kv]);
      return kv;
    },
  });
  return { store: noted, valued };
}

let prefixes = 0;
async function setUp(limit?: number, historyStore: Store = store, configStore: Store = store) {
  const prefix = `/history-${++prefixes}-${Date.now()}/`;
  const history = new ConfigHistory({ store: historyStore, prefix, limit });
  await history.start();
  const config = new ConfigService(configStore, prefix);
  const apply = async (changes: ResourceChange[], prune = false) => {
    const result = await config.apply(changes, {
      prune,
      alsoWrite: (results, writes) =>
        history.operations(
          "ci",
          results.flatMap((r) =>
            r.action === "unchanged" ? [] : [{ kind: r.kind, name: r.name, action: r.action }],
          ),
          writes,
        ),
    });
    if (!result.ok) throw new Error(result.error.message);
    return result.revision;
  };
  return { history, apply, close: () => config.close(), prefix, config };
}

function upstreams(count: number, port: number): ResourceChange[] {
  return Array.from({ length: count }, (_, i) => ({
    kind: "upstreams" as const,
    name: `u-${i}`,
    document: { nodes: [{ address: `127.0.0.1:${port}` }] },
  }));
}

describe("ConfigHistory on etcd", () => {
  it("rebuilds an old version after etcd compacted every revision before now", async () => {
    const { history, apply, close } = await setUp();
    const v1 = await apply(upstreams(2, 9001));
    await apply([{ kind: "upstreams", name: "u-0", delete: true }]);
    const v3 = await apply(upstreams(1, 9003));
    await compactStore(store, v3, { etcdEndpoint: etcd.endpoint });

    const at = await history.at(v1);
    if (!at.ok) throw new Error(at.error.message);
    expect(at.resources).toEqual([
      expect.objectContaining({
        kind: "upstreams",
        name: "u-0",
        spec: expect.objectContaining({ nodes: [{ address: "127.0.0.1:9001", weight: 1 }] }),
      }),
      expect.objectContaining({ kind: "upstreams", name: "u-1" }),
    ]);
    await close();
  });

  it("finds the config at a published version past its own revision only when asked to (a rollout's base)", async () => {
    const { history, apply, close, prefix } = await setUp();
    const v1 = await apply(upstreams(2, 9101));
    // A node registers: the snapshot changes (it lists the node), so its version is the
    // registration's revision, which is no config version in the history.
    const other = await store.commit(
      [],
      [{ type: "put", key: `${prefix}registry/u-0/n1`, value: '{"address":"127.0.0.1:9201"}' }],
    );
    await apply([{ kind: "upstreams", name: "u-0", delete: true }]);
    const between = other.revision;
    expect(between).toBeGreaterThan(v1);
    expect((await history.at(between)).ok).toBe(false);
    const at = await history.at(between, { atOrBefore: true });
    if (!at.ok) throw new Error(at.error.message);
    expect(at.item.version).toBe(v1);
    expect(at.resources.map((r) => r.name)).toEqual(["u-0", "u-1"]);
    await close();
  });

  it("keeps a staged apply's undo steps in its closing commit, at the version it answers", async () => {
    const { history, apply, close } = await setUp();
    const v1 = await apply(upstreams(1, 9001));
    const big = await apply(upstreams(300, 9002));
    const [latest] = await history.list(1);
    expect(latest).toMatchObject({ version: big, summary: "299 created, 1 updated" });
    const at = await history.at(v1);
    if (!at.ok) throw new Error(at.error.message);
    expect(at.resources.map((r) => r.name)).toEqual(["u-0"]);
    await close();
  });

  it("keeps only the newest `limit` versions and says an older one is too old", async () => {
    const { history, apply, close } = await setUp(2);
    const v1 = await apply(upstreams(1, 9001));
    const v2 = await apply(upstreams(1, 9002));
    const v3 = await apply(upstreams(1, 9003));
    expect((await history.list()).map((item) => item.version)).toEqual([v3, v2]);
    const old = await history.at(v1);
    expect(old.ok ? undefined : old.error.code).toBe("CLAWGATE_VERSION_TOO_OLD");
    await close();
  });

  it("undoes a write whose undo steps are bigger than a quarter of a commit, from chunks", async () => {
    // The same etcd seen with 4000-byte transactions: undo steps over 1000 bytes go in chunks.
    const { history, apply, close, prefix } = await setUp(undefined, smallCommits());
    const v1 = await apply(upstreams(20, 9001));
    const v2 = await apply(upstreams(20, 9002));
    expect((await history.list()).map((item) => item.version)).toEqual([v2, v1]);
    expect((await store.range(historyUndoPrefix(prefix))).items.length).toBeGreaterThan(1);
    const before = await history.at(v1);
    if (!before.ok) throw new Error(before.error.message);
    expect(before.resources).toHaveLength(20);
    for (const resource of before.resources) {
      expect(resource.spec).toMatchObject({ nodes: [{ address: "127.0.0.1:9001" }] });
    }
    await close();
  });

  it("deletes an entry's undo chunks when the entry is trimmed", async () => {
    const { history, apply, close, prefix } = await setUp(1, smallCommits());
    await apply(upstreams(20, 9001));
    await apply(upstreams(20, 9002));
    expect((await store.range(historyUndoPrefix(prefix))).items).not.toHaveLength(0);
    await apply(upstreams(1, 9003));
    // A write deletes at most TRIM_BATCH keys; chunks beyond that go with the next write.
    const v4 = await apply(upstreams(1, 9004));
    expect((await history.list()).map((item) => item.version)).toEqual([v4]);
    // Only the kept entry's own undo chunk is left.
    const [entry] = (await store.range(historyPrefix(prefix))).items;
    const id = entry?.key.slice(historyPrefix(prefix).length);
    expect((await store.range(historyUndoPrefix(prefix))).items.map((kv) => kv.key)).toEqual([
      `${historyUndoPrefix(prefix)}${id}/000000`,
    ]);
    await close();
  });

  it("restores a rollout's base with no kept entry at or before it, by undoing the rollout's entry", async () => {
    // historyLimit 1: the rollout's own write trims the base's entry.
    const { history, apply, close } = await setUp(1);
    const base = await apply(upstreams(2, 9301));
    const rollout = await apply([
      ...upstreams(1, 9302),
      { kind: "upstreams", name: "u-1", delete: true },
    ]);
    expect((await history.list()).map((item) => item.version)).toEqual([rollout]);
    const before = await history.before(base, rollout);
    if (!before.ok) throw new Error(before.error.message);
    expect(before.resources).toEqual([
      expect.objectContaining({
        name: "u-0",
        spec: expect.objectContaining({ nodes: [{ address: "127.0.0.1:9301", weight: 1 }] }),
      }),
      expect.objectContaining({ name: "u-1" }),
    ]);
    await close();
  });

  it("restores a base written before any history was kept (the first write ever a rollout)", async () => {
    const { history, apply, close, prefix } = await setUp();
    const base = (
      await store.commit(
        [],
        [
          {
            type: "put",
            key: `${prefix}upstreams/old`,
            value: '{"nodes":[{"address":"127.0.0.1:9401"}]}',
          },
        ],
      )
    ).revision;
    const rollout = await apply([{ kind: "upstreams", name: "old", delete: true }]);
    const before = await history.before(base, rollout);
    if (!before.ok) throw new Error(before.error.message);
    expect(before.resources.map((r) => r.name)).toEqual(["old"]);
    await close();
  });

  it("never trims the entry of the version it is told to keep (a baking rollout's)", async () => {
    const { history, apply, close } = await setUp(1);
    await apply(upstreams(1, 9501));
    const rollout = await apply(upstreams(1, 9502));
    history.keep(() => rollout);
    // A write that lands anyway (another replica's, before it saw the rollout).
    const later = await apply(upstreams(1, 9503));
    expect((await history.list(10)).map((item) => item.version)).toEqual([later, rollout]);
    await close();
  });

  it("says which kept entry cannot be undone when one newer than a base has no undo steps", async () => {
    const { history, apply, close, prefix } = await setUp();
    const base = await apply(upstreams(1, 9601));
    // An entry as control planes wrote before undo steps were kept in chunks.
    const old = await store.commit(
      [],
      [
        {
          type: "put",
          key: `${prefix}upstreams/u-0`,
          value: '{"nodes":[{"address":"127.0.0.1:9602"}]}',
        },
        {
          type: "put",
          key: `${historyPrefix(prefix)}000000000000001-000001`,
          value: JSON.stringify({
            time: new Date().toISOString(),
            author: "ci",
            changes: [],
            undo: null,
          }),
        },
      ],
    );
    const refused = await history.undoable(base);
    expect(refused.ok ? undefined : refused.error.message).toContain(
      `version ${old.revision} has no undo steps`,
    );
    expect((await history.undoable(old.revision)).ok).toBe(true);
    await close();
  });

  it("still reads entries that carry their undo steps inline (written by an older control plane)", async () => {
    const { history, apply, close, prefix } = await setUp();
    const v1 = await apply(upstreams(1, 9701));
    const old = await store.commit(
      [],
      [
        {
          type: "put",
          key: `${prefix}upstreams/u-0`,
          value: '{"nodes":[{"address":"127.0.0.1:9702"}]}',
        },
        {
          type: "put",
          key: `${historyPrefix(prefix)}999999999999999-000001`,
          value: JSON.stringify({
            time: new Date().toISOString(),
            author: "old",
            changes: [{ kind: "upstreams", name: "u-0", action: "updated" }],
            undo: [{ key: "upstreams/u-0", before: '{"nodes":[{"address":"127.0.0.1:9701"}]}' }],
          }),
        },
      ],
    );
    expect((await history.list()).map((item) => [item.version, item.author])).toEqual([
      [old.revision, "old"],
      [v1, "ci"],
    ]);
    const at = await history.at(v1);
    if (!at.ok) throw new Error(at.error.message);
    expect(at.resources[0]?.spec).toEqual({ nodes: [{ address: "127.0.0.1:9701" }] });
    await close();
  });

  it("reads only the values it needs: keys to trim, the entries listed, the chunks undone", async () => {
    const noted = readsNoted();
    const { apply, close, prefix } = await setUp(undefined, smallCommits());
    const v1 = await apply(upstreams(20, 9801));
    const v2 = await apply(upstreams(20, 9802));
    const v3 = await apply(upstreams(20, 9803));
    const history = new ConfigHistory({ store: noted.store, prefix });
    const entries = historyPrefix(prefix);
    const chunks = historyUndoPrefix(prefix);
    const entryKeys = (await store.range(entries)).items;
    const keyOf = (version: number) => entryKeys.find((kv) => kv.modRevision === version)?.key;
    const chunksOf = async (version: number) =>
      (await store.range(`${chunks}${keyOf(version)?.slice(entries.length)}/`)).items.map(
        (kv) => kv.key,
      );
    const historyValues = () =>
      [...noted.valued].filter((key) => key.startsWith(entries) || key.startsWith(chunks)).sort();

    await history.start();
    expect(historyValues()).toEqual([]);

    const [newest] = await history.list(1);
    expect(newest?.version).toBe(v3);
    expect(historyValues()).toEqual([keyOf(v3)]);

    noted.valued.clear();
    const at = await history.at(v2);
    if (!at.ok) throw new Error(at.error.message);
    expect(at.resources[0]?.spec).toMatchObject({ nodes: [{ address: "127.0.0.1:9802" }] });
    expect(historyValues()).toEqual([...(await chunksOf(v3)), keyOf(v2), keyOf(v3)].sort());
    expect(historyValues()).not.toContain(keyOf(v1));
    await close();
  });

  it("records no key for a write attempt that lost a race and was retried", async () => {
    let race: string | undefined;
    // A write straight into etcd lands between the attempt's plan and its commit.
    const racing = Object.assign(Object.create(store) as Store, {
      commit: async (...args: Parameters<Store["commit"]>) => {
        if (race !== undefined) {
          const key = race;
          race = undefined;
          await store.commit([], [{ type: "put", key, value: "around the API" }]);
        }
        return store.commit(...args);
      },
    });
    const { history, apply, close, prefix } = await setUp(2, store, racing);
    await apply(upstreams(1, 9901));
    const v2 = await apply(upstreams(1, 9902));
    race = configGuardKey(prefix);
    const v3 = await apply(upstreams(1, 9903));
    expect(race).toBeUndefined();
    expect((await history.list()).map((item) => item.version)).toEqual([v3, v2]);
    const v4 = await apply(upstreams(1, 9904));
    expect((await history.list()).map((item) => item.version)).toEqual([v4, v3]);
    await close();
  });
});
