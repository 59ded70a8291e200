import { afterAll, beforeAll, expect, it } from "vitest";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { probeWatch } from "../store/store-contract.js";
import { compactStore } from "../testing/compaction.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { ConfigService, type ResourceChange } from "./config-service.js";

// While a big apply runs, GET shows the config as it was before it, read at the gate's
// revision. Once etcd compacts that revision away, GET must still show it (rebuilt from the
// apply's undo records), not fail with etcd's "required revision has been compacted".
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

function upstreams(count: number, nodes: number): ResourceChange[] {
  return Array.from({ length: count }, (_, i) => ({
    kind: "upstreams" as const,
    name: `u-${i}`,
    document: {
      nodes: Array.from({ length: nodes }, (_, n) => ({ address: `10.0.${i % 250}.${n + 1}:80` })),
    },
  }));
}

it("shows the config before a running apply after etcd compacted the gate's revision", async () => {
  const prefix = "/compacted-apply/";
  const reader = new ConfigService(store, prefix);
  expect((await reader.apply(upstreams(10, 5))).ok).toBe(true);
  const before = await reader.get("upstreams", "u-0");
  const listedBefore = await reader.list("upstreams");
  expect(before.ok).toBe(true);

  // The apply rewrites u-0 (3 nodes instead of 5) and creates u-10 ... u-2999 in its first
  // batches; it waits at its fourth batch while the reader looks.
  const firstBatch = await probeWatch(store, `${prefix}upstreams/u-0`, 0);
  let seen!: (outcome: unknown) => void;
  const looked = new Promise<unknown>((resolve) => {
    seen = resolve;
  });
  const writer = new ConfigService(store, prefix, {
    stagedHooks: {
      async beforeBatch(index) {
        if (index !== 3) return;
        try {
          await firstBatch.waitFor(
            (events) => events.some((event) => event.type === "put"),
            "the apply's first batch to rewrite u-0",
          );
          const tick = await store.commit([], [{ type: "put", key: "/elsewhere/t", value: "1" }]);
          await compactStore(store, tick.revision, { etcdEndpoint: etcd.endpoint });
          seen({
            u0: await reader.get("upstreams", "u-0"),
            u10: await reader.get("upstreams", "u-10"),
            list: await reader.list("upstreams"),
          });
        } catch (error) {
          seen({ error: String(error) });
        }
      },
    },
  });
  const applying = writer.apply(upstreams(3_000, 3));
  const during = (await looked) as Record<string, unknown>;
  await firstBatch.close();

  expect(during.u0).toEqual(before);
  expect(during.u10).toMatchObject({ ok: false, error: { code: "CLAWGATE_NOT_FOUND" } });
  // Listed as it was (the read's own revision is the gate's, past the last write before it).
  expect(listedBefore.ok && (during.list as typeof listedBefore).ok).toBe(true);
  if (listedBefore.ok && (during.list as typeof listedBefore).ok) {
    expect((during.list as typeof listedBefore & { ok: true }).items).toEqual(listedBefore.items);
  }
  expect((await applying).ok).toBe(true);
  const after = await reader.get("upstreams", "u-0");
  expect(after.ok && after.resource.document.nodes).toHaveLength(3);
}, 120_000);
