import { Etcd3 } from "etcd3";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
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
  it("reads a range in pages, all pinned to the first page's revision", async () => {
    const store = await openEtcdStore({ endpoints: [etcd.endpoint], pageSize: 2 });
    try {
      const puts = ["a", "b", "c", "d", "e"].map((name) => ({
        type: "put" as const,
        key: `/paged/${name}`,
        value: `${name}1`,
      }));
      const first = await store.commit([], puts);
      // A later write must not show in a read pinned before it, whatever page it lands on.
      await store.commit([], [{ type: "put", key: "/paged/e", value: "e2" }]);

      const now = await store.range("/paged/");
      const then = await store.range("/paged/", { revision: first.revision });

      expect(now.items.map((kv) => kv.value)).toEqual(["a1", "b1", "c1", "d1", "e2"]);
      expect(then.revision).toBe(first.revision);
      expect(then.items.map((kv) => kv.value)).toEqual(["a1", "b1", "c1", "d1", "e1"]);
      expect((await store.get("/paged/e", { revision: first.revision }))?.value).toBe("e1");
    } finally {
      await store.close();
    }
  });

  it("reads a config far over gRPC's 4 MB message limit", async () => {
    const store = await openEtcdStore({ endpoints: [etcd.endpoint] });
    try {
      // 6 MB in 600 keys of 10 KB: one unpaged response would be refused by the client.
      const value = "v".repeat(10_000);
      for (let batch = 0; batch < 6; batch++) {
        await store.commit(
          [],
          Array.from({ length: 100 }, (_, i) => ({
            type: "put" as const,
            key: `/big/${String(batch * 100 + i).padStart(4, "0")}`,
            value,
          })),
        );
      }
      const result = await store.range("/big/");
      expect(result.items).toHaveLength(600);
    } finally {
      await store.close();
    }
  });

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

  it("tries etcd again 1 s after the client's breaker opened, not etcd3's default 5 s", async () => {
    const store = await openEtcdStore({ endpoints: ["http://127.0.0.1:1"], dialTimeoutMs: 300 });
    // The breaker reads Date.now; holding it still lets the test say how long it has been open.
    const frozen = Date.now();
    const clock = vi.spyOn(Date, "now").mockReturnValue(frozen);
    const attempt = () =>
      store.get("/blip").then(
        () => "answered",
        (error: unknown) => String(error),
      );
    try {
      let outcome = "";
      for (let i = 0; i < 10 && !/circuit breaker is open/.test(outcome); i++) {
        outcome = await attempt();
      }
      expect(outcome).toMatch(/circuit breaker is open/);
      clock.mockReturnValue(frozen + 999);
      expect(await attempt()).toMatch(/circuit breaker is open/);
      // Half-open: the next call goes to etcd again (and fails there, as etcd is still away).
      clock.mockReturnValue(frozen + 1_001);
      const next = await attempt();
      expect(next).not.toMatch(/circuit breaker is open/);
      expect(next).not.toBe("answered");
    } finally {
      clock.mockRestore();
      await store.close();
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
