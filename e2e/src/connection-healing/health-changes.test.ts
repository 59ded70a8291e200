import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";
import { healEvents, type NodeHealthView, nodeHealth } from "./fleet-views.js";
import { type NodeProcess, spawnNode } from "./node-process.js";

/** Probes every 200 ms, so a killed node is evicted within about a second. */
const PROBE = {
  intervalMs: 200,
  timeoutMs: 1_000,
  unhealthyThreshold: 2,
  healthyThreshold: 2,
  path: "/healthz",
  expectStatus: "ok",
};

/** What a data plane logs when a control plane's headers say how it takes health reports. */
const MODE_LINE = "node-health reports on this stream";

/*
 * Issue 9: a data plane sends its whole node-health view after each Hello, then only what
 * changed, to a control plane that says it takes that. The control plane's fleet view
 * (GET /v1/upstreams/{name}/health) and heal journal must follow every change as they did
 * with whole views: a node evicted and readmitted, a node removed from the config, and the
 * same after the data plane's stream reconnects to a restarted control plane.
 */
describe("changes-only node-health reports on real processes", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;
  let nodes: Record<"a" | "b" | "c", NodeProcess>;

  async function spawned(name: string, port = 0): Promise<NodeProcess> {
    const started = await spawnNode(name, port);
    teardown.add(`node ${name}`, () => started.process.stop());
    return started;
  }

  /** The control plane's view of the node once the data plane reports it in `state`. */
  function fleetSays(address: string, state: "healthy" | "evicted"): Promise<NodeHealthView> {
    return waitFor(
      async () => {
        const view = await nodeHealth(cp.admin, "trio", address);
        return view?.[state] === 1 && view.total === 1 ? view : false;
      },
      { what: `the control plane to see trio ${address} ${state}`, timeoutMs: 15_000 },
    );
  }

  function applyTrio(list: NodeProcess[]) {
    return cp.admin.apply([
      {
        kind: "upstream",
        name: "trio",
        spec: { nodes: list.map((n) => ({ address: n.address })), healthCheck: PROBE },
      },
      { kind: "route", name: "trio", spec: { match: { pathPrefix: "/trio" }, upstream: "trio" } },
    ]);
  }

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    const [a, b, c] = await Promise.all([spawned("a"), spawned("b"), spawned("c")]);
    nodes = { a: a!, b: b!, c: c! };
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    const write = await applyTrio([nodes.a, nodes.b, nodes.c]);
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
    for (const n of [nodes.a, nodes.b, nodes.c]) await fleetSays(n.address, "healthy");
  }, 60_000);

  afterAll(() => teardown.run());

  it("sends changes only, and the control plane's view follows an eviction and a readmission", async () => {
    const modes = dp.process.output.grep(MODE_LINE);
    expect(modes.length).toBeGreaterThanOrEqual(1);
    expect(modes.at(-1)).toContain('"healthReports":"changes-only"');

    const a = nodes.a;
    await a.process.stop();
    const evicted = await fleetSays(a.address, "evicted");
    expect(evicted.majority).toBe("evicted");
    // The others did not move.
    await fleetSays(nodes.b.address, "healthy");

    nodes.a = await spawned("a-again", a.port);
    await fleetSays(a.address, "healthy");
    const actions = (await healEvents(cp.admin, "trio"))
      .filter((event) => event.node === a.address && event.source === dp.nodeId)
      .map((event) => event.action);
    // Every transition journaled, in order: the data plane's changes carried each one.
    expect(actions).toEqual(expect.arrayContaining(["evict", "readmit"]));
    expect(actions.indexOf("evict")).toBeLessThan(actions.lastIndexOf("readmit"));
  });

  it("drops a node removed from the config from the control plane's view", async () => {
    const write = await applyTrio([nodes.a, nodes.b]);
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
    await waitFor(async () => (await nodeHealth(cp.admin, "trio", nodes.c.address)) === undefined, {
      what: `trio ${nodes.c.address} to leave the control plane's view`,
      timeoutMs: 15_000,
    });
    await fleetSays(nodes.a.address, "healthy");
    await fleetSays(nodes.b.address, "healthy");
  });

  it("starts again from the whole view after the data plane reconnects, then follows changes", {
    timeout: 120_000,
  }, async () => {
    const reconnected = dp.process.output.count(MODE_LINE);
    // Restarted in place: same ports, so the data plane's stream breaks and comes back to it.
    await cp.stop();
    // Changed while no control plane listens: the whole view after the Hello carries it.
    await nodes.b.process.stop();
    cp = await startControlPlane(cp.env);
    teardown.add("control plane, restarted", () => cp.stop());
    // Its reconnect backoff grows to 10 s while the control plane is down.
    await waitFor(() => reconnected() >= 1, {
      what: "the data plane to reconnect",
      timeoutMs: 30_000,
    });
    await fleetSays(nodes.b.address, "evicted");

    // And a change after the whole view travels as a change.
    await nodes.a.process.stop();
    await fleetSays(nodes.a.address, "evicted");
    expect(await nodeHealth(cp.admin, "trio", nodes.c.address)).toBeUndefined();
    expect(dp.process.output.grep(MODE_LINE).at(-1)).toContain('"healthReports":"changes-only"');
  });
});
