import { QuotaKind } from "@clawgate/proto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openEmbeddedStore } from "../store/embedded-store.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/index.js";
import { quotaWindowKey } from "./quota-window-key.js";
import { StoredWindowCounter } from "./stored-window-counter.js";
import type { WindowKey } from "./window-counter.js";

const quiet = { debug() {}, info() {}, warn() {} };
const WINDOW: WindowKey = {
  tenant: "acme",
  kind: QuotaKind.REQUESTS_PER_MINUTE,
  window: 10,
  windowMs: 60_000,
};
// Ten seconds into window 10.
const now = () => 610_000;

describe("StoredWindowCounter", () => {
  let store: Store;
  const counters: StoredWindowCounter[] = [];
  const replica = async () => {
    const counter = new StoredWindowCounter({ store, prefix: "/t/", logger: quiet, now });
    await counter.start();
    counters.push(counter);
    return counter;
  };
  afterEach(async () => {
    for (const counter of counters.splice(0)) await counter.stop();
    await store.close();
  });

  it("never lets replicas reserving at the same time take more than the limit between them", async () => {
    store = await openEmbeddedStore({});
    const [a, b] = [await replica(), await replica()];
    let reserved = 0;
    // Both replicas race until the fleet has nothing left; every write is a compare-and-swap.
    for (;;) {
      const claims = await Promise.all([a.reserve(WINDOW, 20), b.reserve(WINDOW, 20)]);
      const units = claims.reduce((sum, claim) => sum + claim.units, 0);
      reserved += units;
      if (units === 0) break;
    }
    expect(reserved).toBe(20);
    expect((await store.get(quotaWindowKey("/t/", WINDOW)))?.value).toBe("20");
  });

  it("reserves a quarter of what is left, at least one unit", async () => {
    store = await openEmbeddedStore({});
    const a = await replica();
    expect(await a.reserve(WINDOW, 20)).toEqual({ units: 5, total: 5 });
    expect(await a.reserve(WINDOW, 20)).toEqual({ units: 4, total: 9 });
    expect(await a.reserve(WINDOW, 10)).toEqual({ units: 1, total: 10 });
    expect(await a.reserve(WINDOW, 10)).toEqual({ units: 0, total: 10 });
  });

  it("charges consumption past the limit and takes back what is given back, never below zero", async () => {
    store = await openEmbeddedStore({});
    const a = await replica();
    await a.reserve(WINDOW, 4);
    expect(await a.charge(WINDOW, 30)).toEqual({ units: 30, total: 31 });
    expect(await a.charge(WINDOW, -40)).toEqual({ units: -31, total: 0 });
  });

  it("binds each count to a store lease, so the count goes away after its window", async () => {
    store = await openEmbeddedStore({});
    const a = await replica();
    await a.reserve(WINDOW, 20);
    expect((await store.get(quotaWindowKey("/t/", WINDOW)))?.lease).toBeDefined();
  });

  it("tells every replica of a count another one wrote", async () => {
    store = await openEmbeddedStore({});
    const [a, b] = [await replica(), await replica()];
    const heard = new Promise((resolve) =>
      b.onTotal((key, total) => {
        if (total === 20) resolve(key);
      }),
    );
    await a.charge(WINDOW, 20);
    expect(await heard).toEqual({ tenant: "acme", kind: WINDOW.kind, window: 10 });
  });
});

describe("StoredWindowCounter on etcd", () => {
  let etcd: EtcdProcess;
  const stores: Store[] = [];
  beforeAll(async () => {
    etcd = await startEtcd();
  }, 30_000);
  afterAll(async () => {
    for (const store of stores) await store.close();
    await etcd?.stop();
  });

  it("shares one limit between replicas on their own connections, racing with compare-and-swap", async () => {
    const replicas: StoredWindowCounter[] = [];
    for (let i = 0; i < 3; i++) {
      const store = await openEtcdStore({ endpoints: [etcd.endpoint] });
      stores.push(store);
      replicas.push(new StoredWindowCounter({ store, prefix: "/race/", logger: quiet, now }));
    }
    let reserved = 0;
    for (;;) {
      const claims = await Promise.all(replicas.map((replica) => replica.reserve(WINDOW, 50)));
      const units = claims.reduce((sum, claim) => sum + claim.units, 0);
      reserved += units;
      if (units === 0) break;
    }
    expect(reserved).toBe(50);
    const count = await (stores[0] as Store).get(quotaWindowKey("/race/", WINDOW));
    expect(count?.value).toBe("50");
    expect(count?.lease).toBeDefined();
  }, 30_000);
});
