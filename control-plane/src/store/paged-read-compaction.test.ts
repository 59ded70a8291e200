import { afterAll, beforeAll, expect, it } from "vitest";
import { compactStore } from "../testing/compaction.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { openEtcdStore } from "./etcd-store.js";
import type { Store } from "./store.js";

// A paged read pins its pages to one revision; etcd compacting past it between two pages must
// not fail the read (it starts again, newer), and a revision asked for and gone is named.
let etcd: EtcdProcess;
let store: Store;

beforeAll(async () => {
  etcd = await startEtcd();
  // One key per page, so a read of many keys spans many round trips for a compaction to hit.
  store = await openEtcdStore({ endpoints: [etcd.endpoint], pageSize: 1 });
});
afterAll(async () => {
  await store?.close();
  await etcd?.stop();
});

const KEYS = 200;
const COMPACTIONS = 3;

it("reads every key at one revision while etcd compacts between its pages", async () => {
  const prefix = "/paged/";
  for (let i = 0; i < KEYS; i += 100) {
    const puts = Array.from({ length: 100 }, (_, j) => ({
      type: "put" as const,
      key: `${prefix}k-${String(i + j).padStart(4, "0")}`,
      value: "v1",
    }));
    await store.commit([], puts);
  }
  // Each compaction follows a write elsewhere, so it lands past the revision the read pinned.
  let reading = true;
  let compactions = 0;
  const compactor = (async () => {
    while (reading && compactions < COMPACTIONS) {
      const put = await store.commit([], [{ type: "put", key: "/elsewhere/tick", value: "x" }]);
      await compactStore(store, put.revision, { etcdEndpoint: etcd.endpoint });
      compactions++;
    }
  })();
  const read = await store.range(prefix).finally(() => {
    reading = false;
  });
  await compactor;

  expect(compactions).toBeGreaterThan(0);
  expect(read.items).toHaveLength(KEYS);
  expect(read.items.every((item) => item.value === "v1" && item.modRevision <= read.revision)).toBe(
    true,
  );
}, 60_000);

it("names the cause when the revision asked for has been compacted", async () => {
  const first = await store.commit([], [{ type: "put", key: "/gone/k", value: "1" }]);
  const second = await store.commit([], [{ type: "put", key: "/gone/k", value: "2" }]);
  await compactStore(store, second.revision, { etcdEndpoint: etcd.endpoint });
  await expect(store.range("/gone/", { revision: first.revision })).rejects.toMatchObject({
    code: "CLAWGATE_STORE_COMPACTED",
    message: `cannot read revision ${first.revision}: etcd has compacted it`,
  });
}, 30_000);
