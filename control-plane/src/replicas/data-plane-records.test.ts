import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/index.js";
import { DataPlaneRecords } from "./data-plane-records.js";

const PREFIX = "/clawgate-records-test/";
/** Waits are on events; this only turns a hang into a readable failure. */
const WAIT_MS = 10_000;

/** Resolves once `predicate` holds, checked after every change `records` sees. */
function until(records: DataPlaneRecords, what: string, predicate: () => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      off();
      resolve();
    };
    const timer = setTimeout(() => {
      off();
      reject(new Error(`timed out waiting for ${what}`));
    }, WAIT_MS);
    const off = records.onChange(() => {
      if (predicate()) done();
    });
    if (predicate()) done();
  });
}

/** A store that counts its commits, to show writes follow changes, not reports. */
function counting(store: Store): { store: Store; commits: () => number } {
  let commits = 0;
  const wrapped: Store = Object.create(store);
  wrapped.commit = (compares, operations) => {
    commits++;
    return store.commit(compares, operations);
  };
  return { store: wrapped, commits: () => commits };
}

describe("DataPlaneRecords shared between two replicas on etcd", () => {
  let etcd: EtcdProcess;
  const stores: Store[] = [];
  const started: DataPlaneRecords[] = [];

  beforeAll(async () => {
    etcd = await startEtcd();
  });
  afterAll(async () => {
    for (const records of started) await records.stop();
    for (const store of stores) await store.close();
    await etcd.stop();
  });

  async function replica(replicaId: string, prefix: string) {
    const store = await openEtcdStore({ endpoints: [etcd.endpoint] });
    stores.push(store);
    const counted = counting(store);
    const records = new DataPlaneRecords({
      store: counted.store,
      prefix,
      replicaId,
      flushMs: 50,
    });
    await records.start();
    started.push(records);
    return { records, commits: counted.commits };
  }

  it("shows one replica's data planes, outcomes and breakers on the other, until they leave", async () => {
    const prefix = `${PREFIX}view/`;
    const one = await replica("cp-1", prefix);
    const two = await replica("cp-2", prefix);
    one.records.connected("dp-a");
    one.records.outcomes("dp-a", [{ version: 7, requests: 20, failures: 20 }]);
    one.records.breakers("dp-a", [
      { upstream: "agents", state: "open", sinceMs: 1_000, cooldownUntilMs: 31_000 },
    ]);
    await until(two.records, "cp-2 to see dp-a's record", () => {
      const record = two.records.get("dp-a");
      return record?.outcomes.length === 1 && record.breakers.length === 1;
    });
    expect(two.records.nodes()).toEqual(["dp-a"]);
    expect(two.records.get("dp-a")).toMatchObject({
      outcomes: [{ version: 7, requests: 20, failures: 20 }],
      breakers: [{ upstream: "agents", state: "open", cooldownUntilMs: 31_000 }],
    });

    one.records.disconnected("dp-a");
    await until(two.records, "dp-a's record to go", () => two.records.get("dp-a") === undefined);
    expect(two.records.nodes()).toEqual([]);
  });

  it("writes once per flush for many changes, and not at all for a report that changes nothing", async () => {
    const prefix = `${PREFIX}writes/`;
    const one = await replica("cp-1", prefix);
    const two = await replica("cp-2", prefix);
    const ids = Array.from({ length: 30 }, (_, i) => `dp-${String(i).padStart(2, "0")}`);
    for (const id of ids) {
      one.records.connected(id);
      one.records.outcomes(id, [{ version: 3, requests: 1, failures: 0 }]);
    }
    await until(two.records, "cp-2 to see all 30", () => two.records.nodes().length === 30);
    expect(one.commits()).toBe(1);

    // The same counts again, from every data plane: nothing to write.
    for (const id of ids) one.records.outcomes(id, [{ version: 3, requests: 1, failures: 0 }]);
    one.records.outcomes("dp-00", [{ version: 3, requests: 2, failures: 0 }]);
    await until(
      two.records,
      "cp-2 to see dp-00's new count",
      () => two.records.get("dp-00")?.outcomes[0]?.requests === 2,
    );
    expect(one.commits()).toBe(2);
  });
});
