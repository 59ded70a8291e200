import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DataPlaneView } from "../fleet/data-plane-view.js";
import { Fleet } from "../fleet/fleet.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/index.js";
import { DataPlaneRecords } from "./data-plane-records.js";
import { FleetView, shareFleet } from "./fleet-view.js";

const PREFIX = "/clawgate-fleet-view-test/";
/** Waits are on events; this only turns a hang into a readable failure. */
const WAIT_MS = 10_000;
const HELLO = { hostname: "host-a", softwareVersion: "1.2.3", lastAppliedVersion: 0 };

/** Resolves once `predicate` holds, checked after every change `view` announces. */
function until(view: FleetView, what: string, predicate: () => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      off();
      resolve();
    };
    const timer = setTimeout(() => {
      off();
      reject(new Error(`timed out waiting for ${what}: ${JSON.stringify(view.list())}`));
    }, WAIT_MS);
    const off = view.onChange(() => {
      if (predicate()) done();
    });
    if (predicate()) done();
  });
}

describe("FleetView: every replica lists the whole fleet", () => {
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

  /** One replica as main.ts assembles it: its fleet, its shared records, the merged view. */
  async function replica(replicaId: string, prefix: string) {
    const store = await openEtcdStore({ endpoints: [etcd.endpoint] });
    stores.push(store);
    const records = new DataPlaneRecords({ store, prefix, replicaId, flushMs: 20 });
    await records.start();
    started.push(records);
    const fleet = new Fleet({ graceMs: 60_000 });
    shareFleet(fleet, records);
    return { fleet, records, view: new FleetView({ fleet, records, replicaId, graceMs: 60_000 }) };
  }

  const row = (view: FleetView, nodeId: string): DataPlaneView | undefined =>
    view.list().find((dp) => dp.nodeId === nodeId);

  it("shows each replica's data planes on both, with state, applied version, last NACK and replica", async () => {
    const prefix = `${PREFIX}both/`;
    const one = await replica("cp-1", prefix);
    const two = await replica("cp-2", prefix);
    for (const { fleet } of [one, two]) fleet.setPublished(5);
    one.fleet.connected("dp-a", HELLO);
    one.fleet.acked("dp-a", 5);
    two.fleet.connected("dp-b", { ...HELLO, hostname: "host-b" });
    two.fleet.nacked("dp-b", 5, "route r1: bad regex");

    for (const { view } of [one, two]) {
      await until(view, "both data planes listed", () => view.list().length === 2);
      expect(view.list()).toMatchObject([
        { nodeId: "dp-a", state: "SYNCED", appliedVersion: 5, replica: "cp-1", connected: true },
        {
          nodeId: "dp-b",
          hostname: "host-b",
          state: "NACKED",
          appliedVersion: 0,
          replica: "cp-2",
          lastNack: { version: 5, error: "route r1: bad regex" },
        },
      ]);
    }

    // A publish dp-a has not applied yet: behind, within the grace period, on either replica.
    for (const { fleet } of [one, two]) fleet.setPublished(9);
    expect(row(one.view, "dp-a")?.state).toBe("SYNCING");
    await until(
      two.view,
      "cp-2 to see dp-a behind",
      () => row(two.view, "dp-a")?.state === "SYNCING",
    );
    one.fleet.acked("dp-a", 9);
    await until(
      two.view,
      "cp-2 to see dp-a apply 9",
      () => row(two.view, "dp-a")?.appliedVersion === 9,
    );
    expect(row(two.view, "dp-a")?.state).toBe("SYNCED");
  });

  it("judges a data plane against the version its own replica publishes", async () => {
    // cp-2 read the store later: the same config is version 7 there, 5 on cp-1.
    const prefix = `${PREFIX}versions/`;
    const one = await replica("cp-1", prefix);
    const two = await replica("cp-2", prefix);
    one.fleet.setPublished(5);
    two.fleet.setPublished(7);
    one.fleet.connected("dp-e", HELLO);
    one.fleet.acked("dp-e", 5);
    await until(
      two.view,
      "cp-2 to list dp-e at 5",
      () => row(two.view, "dp-e")?.appliedVersion === 5,
    );
    expect(row(two.view, "dp-e")).toMatchObject({ state: "SYNCED", publishedVersion: 5 });
  });

  it("announces another replica's changes and shows a data plane that left it as disconnected", async () => {
    const prefix = `${PREFIX}live/`;
    const one = await replica("cp-1", prefix);
    const two = await replica("cp-2", prefix);
    const heard: string[] = [];
    two.view.onChange((nodeId) => {
      if (nodeId !== null) heard.push(nodeId);
    });
    const token = one.fleet.connected("dp-c", HELLO);
    await until(two.view, "cp-2 to list dp-c", () => row(two.view, "dp-c")?.replica === "cp-1");
    expect(heard).toContain("dp-c");

    one.fleet.disconnected("dp-c", token);
    await until(
      two.view,
      "dp-c to show as disconnected",
      () => row(two.view, "dp-c")?.connected === false,
    );
    expect(row(two.view, "dp-c")).toMatchObject({ state: "DISCONNECTED" });
    expect(row(two.view, "dp-c")?.replica).toBeUndefined();

    // It moves to cp-2: listed once, connected there.
    two.fleet.connected("dp-c", HELLO);
    expect(two.view.list().filter((dp) => dp.nodeId === "dp-c")).toMatchObject([
      { connected: true, replica: "cp-2" },
    ]);
  });

  it("drops a dead replica's data planes when its lease expires", async () => {
    const prefix = `${PREFIX}lease/`;
    const store = await openEtcdStore({ endpoints: [etcd.endpoint] });
    stores.push(store);
    // A replica that stops refreshing its lease (as a killed process would) after sharing dp-d.
    const dying = new DataPlaneRecords({
      store,
      prefix,
      replicaId: "cp-1",
      flushMs: 0,
      leaseTtlSeconds: 1,
    });
    await dying.start();
    const fleet = new Fleet();
    shareFleet(fleet, dying);
    const two = await replica("cp-2", prefix);
    fleet.connected("dp-d", HELLO);
    await until(two.view, "cp-2 to list dp-d", () => row(two.view, "dp-d")?.connected === true);
    await dying.stop();
    await until(
      two.view,
      "dp-d's record to go with the lease",
      () => row(two.view, "dp-d")?.connected === false,
    );
    expect(row(two.view, "dp-d")?.state).toBe("DISCONNECTED");
  }, 20_000);
});
