import { Etcd3 } from "etcd3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { openEtcdStore } from "./etcd-store.js";
import { describeStoreContract, probeWatch } from "./store-contract.js";

let etcd: EtcdProcess;

beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

// The shared etcd has history by then, so the fresh-store case gets an etcd of its own.
describeStoreContract(
  "etcd",
  () => openEtcdStore({ endpoints: [etcd.endpoint] }),
  async () => {
    const own = await startEtcd();
    const store = await openEtcdStore({ endpoints: [own.endpoint] }).catch(async (error) => {
      await own.stop();
      throw error;
    });
    return {
      store,
      dispose: async () => {
        await store.close();
        await own.stop();
      },
    };
  },
);

describe("etcd store", () => {
  it("fails a watch whose start revision etcd has compacted", async () => {
    const store = await openEtcdStore({ endpoints: [etcd.endpoint] });
    const admin = new Etcd3({ hosts: etcd.endpoint });
    try {
      const r1 = await store.commit([], [{ type: "put", key: "/compact/k", value: "1" }]);
      const r2 = await store.commit([], [{ type: "put", key: "/compact/k", value: "2" }]);
      await admin.kv.compact({ revision: r2.revision, physical: true });

      const probe = await probeWatch(store, "/compact/", r1.revision);
      const error = await probe.nextError();

      expect(error.message).toMatch(/compacted/);
      expect((error as Error & { code?: string }).code).toBe("CLAWGATE_STORE_COMPACTED");
      expect(probe.events).toEqual([]);
    } finally {
      admin.close();
      await store.close();
    }
  });

  it("leaves its leases to their TTL on close, so another replica can keep renewing them", async () => {
    const store = await openEtcdStore({ endpoints: [etcd.endpoint] });
    const lease = await store.grantLease(60);
    await store.commit([], [{ type: "put", key: "/close/k", value: "v", lease }]);
    await store.close();

    const other = await openEtcdStore({ endpoints: [etcd.endpoint] });
    try {
      expect((await other.get("/close/k"))?.value).toBe("v");
      expect(await other.refreshLease(lease)).toBe(true);
      await other.revokeLease(lease);
      expect(await other.get("/close/k")).toBeUndefined();
    } finally {
      await other.close();
    }
  });

  it("reports a clear error when etcd is unreachable", async () => {
    const store = await openEtcdStore({ endpoints: ["http://127.0.0.1:1"], dialTimeoutMs: 300 });
    try {
      await expect(store.range("/")).rejects.toThrow();
    } finally {
      await store.close();
    }
  });
});
