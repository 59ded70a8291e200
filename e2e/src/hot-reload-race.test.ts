import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  mixedSnapshotResponses,
  type NamedUpstream,
  send,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
  waitForConvergence,
} from "./support/index.js";

/**
 * The hot-reload race of seed 001: a route and its upstream's node list change separately, and a
 * proxy that applies them separately can, for a moment, send the route's traffic to a node list
 * that no single config ever paired with it. Here route /race flips between upstreams u1 and u2,
 * and each upstream's node set flips between two disjoint sets, mostly while it is not the
 * route's target. Any response from a node list the route did not have in one snapshot, at a
 * point in the write history a sequential client could still be in, is a mixed snapshot.
 */

type UpstreamName = "u1" | "u2";
const NODE_SETS: Record<UpstreamName, [string[], string[]]> = {
  u1: [
    ["n1", "n2"],
    ["n3", "n4"],
  ],
  u2: [
    ["n5", "n6"],
    ["n7", "n8"],
  ],
};
const WRITES = 200;
const CLIENT_LOOPS = 4;

interface ConfigState {
  route: UpstreamName;
  /** Which of the two node sets each upstream has now. */
  sets: Record<UpstreamName, 0 | 1>;
}

type Write = { kind: "route"; to: UpstreamName } | { kind: "nodes"; of: UpstreamName };

// Six writes return to the start. Flipping an upstream's nodes while the route points elsewhere
// and then pointing the route at it is the step a mixed apply would get wrong: the route would
// meet the node list from before the flip, which the client saw long ago.
const CYCLE: Write[] = [
  { kind: "nodes", of: "u1" },
  { kind: "route", to: "u2" },
  { kind: "nodes", of: "u1" },
  { kind: "nodes", of: "u2" },
  { kind: "route", to: "u1" },
  { kind: "nodes", of: "u2" },
];

function next(state: ConfigState, write: Write): ConfigState {
  if (write.kind === "route") return { ...state, route: write.to };
  return { ...state, sets: { ...state.sets, [write.of]: state.sets[write.of] === 0 ? 1 : 0 } };
}

function reachable(state: ConfigState): Set<string> {
  return new Set(NODE_SETS[state.route][state.sets[state.route]]);
}

interface Observation {
  /** The node that answered, or undefined when the request failed. */
  node: string | undefined;
  status: number | undefined;
  error?: string;
  /** Writes started when the response was complete: the newest state it could come from. */
  newestState: number;
}

describe("hot reload under traffic", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  const nodes: Record<string, NamedUpstream> = {};

  const nodeSpec = (upstream: UpstreamName, set: 0 | 1) => ({
    nodes: NODE_SETS[upstream][set].map((name) => ({ address: nodes[name]!.address, weight: 1 })),
  });
  const routeSpec = (to: UpstreamName) => ({ match: { pathPrefix: "/race" }, upstream: to });

  beforeAll(async () => {
    const etcd: EtcdProcess = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    for (const name of ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"]) {
      const node = await startNamedUpstream(name);
      teardown.add(`upstream ${name}`, () => node.close());
      nodes[name] = node;
    }
    cp = await startControlPlane({
      CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint,
      CLAWGATE_LOG_LEVEL: "warn",
    });
    teardown.add("control plane", () => cp.stop());
    const applied = await cp.admin.apply([
      { kind: "upstream", name: "u1", spec: nodeSpec("u1", 0) },
      { kind: "upstream", name: "u2", spec: nodeSpec("u2", 0) },
      { kind: "route", name: "race", spec: routeSpec("u1") },
    ]);
    dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_NODE_ID: "dp-race",
      CLAWGATE_LOG_LEVEL: "warn",
    });
    teardown.add("data plane", () => dp.stop());
    // Not an earlier version published before the apply: the one holding its resources.
    await waitForConvergence(cp, [dp], {
      atLeast: (applied.body as { revision: number }).revision,
    });
  });

  afterAll(() => teardown.run());

  it("never serves a route with a node list from another snapshot, and never fails", async () => {
    // states[k] is the config after k writes; states[0] is the one applied above.
    const states: ConfigState[] = [{ route: "u1", sets: { u1: 0, u2: 0 } }];
    let writesStarted = 0;
    let completed = 0;
    let stopping = false;

    const clientLoop = async (): Promise<Observation[]> => {
      const seen: Observation[] = [];
      while (!stopping) {
        try {
          const response = await send(`${dp.proxyUrl}/race/${completed}`);
          const node = (response.json as { upstream?: string } | undefined)?.upstream;
          seen.push({
            node,
            status: response.status,
            newestState: writesStarted,
            ...(response.status === 200 ? {} : { error: response.text.slice(0, 200) }),
          });
        } catch (error) {
          seen.push({
            node: undefined,
            status: undefined,
            error: String((error as Error).cause ?? error),
            newestState: writesStarted,
          });
        }
        completed++;
      }
      return seen;
    };
    const loops = Array.from({ length: CLIENT_LOOPS }, () => clientLoop());

    // The snapshot version each write produced: states[k] is what version versions[k - 1] holds.
    const versions: (number | undefined)[] = [];
    try {
      let lastVersion = (await cp.admin.snapshot()).version;
      for (let k = 1; k <= WRITES; k++) {
        const write = CYCLE[(k - 1) % CYCLE.length]!;
        const state = next(states[k - 1]!, write);
        writesStarted = k;
        const response =
          write.kind === "route"
            ? await cp.admin.putRoute("race", routeSpec(write.to))
            : await cp.admin.putUpstream(write.of, nodeSpec(write.of, state.sets[write.of]));
        states.push(state);
        // The write's revision is the version of the first snapshot that holds it. Without an
        // ETag, the CP's snapshot version moving past the last one is the next best signal.
        const version =
          response.revision ??
          (await waitFor(
            async () => {
              const v = (await cp.admin.snapshot()).version;
              return v > lastVersion ? v : false;
            },
            { what: `the CP to build a snapshot after write ${k}` },
          ));
        versions.push(version);
        lastVersion = version;
        // First half: let the data plane apply each write and the clients hit it before the
        // next, so every state is served while requests are in flight across its swap. Second
        // half: only let the clients move, so snapshots arrive while earlier ones are applied.
        const before = completed;
        const paced = k <= WRITES / 2;
        await waitFor(
          async () =>
            completed >= before + (paced ? CLIENT_LOOPS : 1) &&
            (!paced || ((await dp.snapshotVersion()) ?? 0) >= version),
          { what: `the data plane to apply version ${version} (write ${k}) under traffic` },
        );
      }
      await waitForConvergence(cp, [dp], { atLeast: versions.at(-1) });
    } finally {
      stopping = true;
    }
    const observations = await Promise.all(loops);

    const failures = observations.flat().filter((o) => o.status !== 200 || o.node === undefined);
    expect(failures.slice(0, 5), `${failures.length} failed requests`).toEqual([]);

    const reach = states.map(reachable);
    const violations = observations.flatMap((seen, loop) =>
      mixedSnapshotResponses(
        reach,
        seen.map((o) => ({ node: o.node!, newestState: o.newestState })),
        (k) => (k === 0 ? "initial" : `v${versions[k - 1]}`),
      ).map((problem) => `client ${loop}: ${problem}`),
    );
    expect(violations.slice(0, 5), `${violations.length} mixed-snapshot responses`).toEqual([]);

    // The check means something only if traffic really crossed the changes.
    const total = observations.flat().length;
    const nodesSeen = new Set(observations.flat().map((o) => o.node));
    expect(total).toBeGreaterThanOrEqual(WRITES * CLIENT_LOOPS);
    expect([...nodesSeen].sort()).toEqual(["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"]);

    // And it ends where the last write left it.
    const final = reachable(states[WRITES]!);
    for (let i = 0; i < 4; i++) {
      const response = await send(`${dp.proxyUrl}/race/final`);
      expect(final).toContain((response.json as { upstream?: string }).upstream);
    }
  }, 60_000);
});
