import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  freePorts,
  type LiveEvents,
  openLiveEvents,
  startControlPlane,
  startDataPlane,
  Teardown,
} from "../support/index.js";
import { PROBE } from "./console-cluster.js";

interface HealData {
  upstream: string;
  node?: string;
  action: string;
  source: string;
}

/**
 * Issue 14 with two control-plane replicas: the console may be open on either one. A heal event
 * journaled by cp-1 (its data plane evicted a node) must reach a console following cp-2's
 * GET /v1/live, pushed, not on the next reload.
 */
describe("GET /v1/live carries heal events journaled by another replica", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let first: ControlPlane;
  let second: ControlPlane;
  let live: LiveEvents;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    first = await startControlPlane(
      { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_INSTANCE_ID: "cp-1" },
      { name: "cp-1" },
    );
    teardown.add("cp-1", () => first.stop());
    second = await startControlPlane(
      { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_INSTANCE_ID: "cp-2" },
      { name: "cp-2" },
    );
    teardown.add("cp-2", () => second.stop());
  }, 60_000);
  afterAll(() => {
    live?.close();
    return teardown.run();
  });

  it("pushes cp-1's eviction to a client of cp-2", async () => {
    live = await openLiveEvents(second.adminUrl, second.token);
    // A node nobody listens on: the data plane's probes evict it and cp-1 journals that.
    const deadNode = `127.0.0.1:${(await freePorts(1))[0]}`;
    await first.admin.putUpstream("probed", {
      nodes: [{ address: deadNode, weight: 1 }],
      healthCheck: PROBE,
    });
    const dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: first.grpcAddress,
      CLAWGATE_NODE_ID: "dp-1",
    });
    teardown.add("dp-1", () => dp.stop());

    const event = await live.next("cp-2's live stream to carry the eviction", (e) => {
      const heal = e.data as HealData;
      return e.type === "heal" && heal.action === "evict" && heal.node === deadNode;
    });
    expect(event.data).toMatchObject({ upstream: "probed", source: "dp-1" });
    // It was cp-1 that heard the data plane and journaled it: cp-2 lists it as cp-1's.
    expect(await second.admin.dataplanes()).toMatchObject([{ nodeId: "dp-1", replica: "cp-1" }]);
  }, 60_000);
});
