import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigService, type ResourceChange } from "../resources/config-service.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { compactStore } from "../testing/compaction.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { ConfigHistory, historyUndoPrefix } from "./config-history.js";

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

let prefixes = 0;
async function setUp(limit?: number, historyStore: Store = store) {
  const prefix = `/history-${++prefixes}-${Date.now()}/`;
  const history = new ConfigHistory({ store: historyStore, prefix, limit });
  await history.start();
  const config = new ConfigService(store, prefix);
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
  return { history, apply, close: () => config.close(), prefix };
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
    expect((await store.range(historyUndoPrefix(prefix))).items).toHaveLength(0);
    await close();
  });
});
