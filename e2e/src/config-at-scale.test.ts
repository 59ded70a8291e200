import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ApplyResource,
  type ControlPlane,
  type DataPlane,
  metricSum,
  type NamedUpstream,
  send,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
} from "./support/index.js";

const ROUTES = 3_000;
const UPSTREAMS = 500;
const SERVERS = 10;

/** Upstream u's only node: one of a few real servers, so a reply names the upstream's server. */
const serverOf = (upstream: number) => `srv-${upstream % SERVERS}`;

/**
 * Issue 9 at a size CI can afford, on real etcd, a real control plane and data planes: every
 * route of 3,000 serves; a failed big apply changes nothing; and a data plane that followed a
 * run of changes as deltas routes every request exactly as one that got the same version as one
 * full snapshot.
 */
describe("3,000 routes and 500 upstreams: deltas, full snapshots and big applies agree", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let following: DataPlane;
  const servers = new Map<string, NamedUpstream>();
  /** Which server each route's requests must reach, kept in step with every change made. */
  const expected = new Map<number, string | undefined>();

  const upstreamResource = (u: number, server = serverOf(u)): ApplyResource => ({
    kind: "upstream",
    name: `u-${u}`,
    spec: { nodes: [{ address: servers.get(server)!.address }] },
  });
  const routeResource = (r: number, upstream: number): ApplyResource => ({
    kind: "route",
    name: `r-${r}`,
    spec: { match: { pathPrefix: `/r/${r}` }, upstream: `u-${upstream}` },
  });

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    for (let s = 0; s < SERVERS; s++) {
      const server = await startNamedUpstream(`srv-${s}`);
      servers.set(server.name, server);
      teardown.add(server.name, () => server.close());
    }
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    following = await startDataPlane(
      { CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_NODE_ID: "dp-following" },
      { name: "following data plane" },
    );
    teardown.add("following data plane", () => following.stop());
  }, 60_000);

  afterAll(() => teardown.run());

  it("serves every route after one apply of all of it", { timeout: 120_000 }, async () => {
    const resources: ApplyResource[] = [];
    for (let u = 0; u < UPSTREAMS; u++) resources.push(upstreamResource(u));
    for (let r = 0; r < ROUTES; r++) {
      resources.push(routeResource(r, r % UPSTREAMS));
      expected.set(r, serverOf(r % UPSTREAMS));
    }
    const applied = (await cp.admin.apply(resources)).body as { revision: number };
    await waitForVersion(following, applied.revision);
    const answers = await answersOf(following);
    expect(mismatches(answers)).toEqual([]);
  });

  it("refuses a big apply that fails at its last resource and changes nothing", async () => {
    const before = await cp.admin.snapshot();
    const resources: ApplyResource[] = [];
    // Every route moves to another upstream, but the last names one that does not exist.
    for (let r = 0; r < ROUTES - 1; r++) resources.push(routeResource(r, (r + 1) % UPSTREAMS));
    resources.push(routeResource(ROUTES - 1, UPSTREAMS + 7));
    const response = await cp.admin.request("POST", "/v1/apply", { resources });
    expect(response.status).toBe(409);
    expect(response.body).toMatchObject({ error: { code: "CLAWGATE_REFERENCE_CONFLICT" } });
    expect(JSON.stringify(response.body)).toContain(`u-${UPSTREAMS + 7}`);
    const after = await cp.admin.snapshot();
    expect(after.version).toBe(before.version);
    const sample = await cp.admin.get("routes", "r-0");
    expect((sample.body as { spec: { upstream: string } }).spec.upstream).toBe("u-0");
    expect(await following.snapshotVersion()).toBe(before.version);
  });

  it("routes every request the same after 30 deltas as after one full snapshot", {
    timeout: 180_000,
  }, async () => {
    let version = 0;
    // Changes of each kind a delta carries: a route moved, removed, added; an upstream's node.
    for (let i = 0; i < 10; i++) {
      const r = i * 97;
      const upstream = (r + 250) % UPSTREAMS;
      version = (await cp.admin.putRoute(`r-${r}`, routeResource(r, upstream).spec)).revision!;
      expected.set(r, serverOf(upstream));
    }
    for (let i = 0; i < 10; i++) {
      const r = 5 + i * 101;
      version = (await cp.admin.delete("routes", `r-${r}`)).revision!;
      expected.set(r, undefined);
    }
    for (let i = 0; i < 5; i++) {
      const r = ROUTES + i;
      version = (await cp.admin.putRoute(`r-${r}`, routeResource(r, i).spec)).revision!;
      expected.set(r, serverOf(i));
    }
    for (let u = 0; u < 5; u++) {
      // Upstream u now sends to srv-9 instead of its own server: every route on it follows.
      const moved = upstreamResource(u, "srv-9");
      version = (await cp.admin.putUpstream(moved.name, moved.spec)).revision!;
      for (const [r] of expected) {
        if (expected.get(r) !== undefined && upstreamOf(r) === u) expected.set(r, "srv-9");
      }
    }
    await waitForVersion(following, version);
    const sends = await controlPlaneMetrics(cp);
    expect(metricSum(sends, "clawgate_snapshot_sends_total", { kind: "delta" })).toBeGreaterThan(0);

    // A data plane that starts now gets the same version as one full snapshot.
    const fresh = await startDataPlane(
      { CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_NODE_ID: "dp-fresh" },
      { name: "fresh data plane", readyTimeoutMs: 60_000 },
    );
    teardown.add("fresh data plane", () => fresh.stop());
    await waitForVersion(fresh, version);

    // The same config, resource for resource, whichever way it arrived...
    const [followed, whole] = await Promise.all([following.configDump(), fresh.configDump()]);
    expect(followed).toMatchObject({ version, source: "control-plane" });
    expect(resourcesOf(followed)).toEqual(resourcesOf(whole));
    // ...and the same compiled result: every route answered by the same server.
    const [byDeltas, byFull] = await Promise.all([answersOf(following), answersOf(fresh)]);
    expect(mismatches(byDeltas)).toEqual([]);
    expect(byDeltas).toEqual(byFull);
    expect(following.process.output.grep("snapshot refused")).toHaveLength(0);
  });

  /** The upstream route r was last pointed at, read back from what the test applied. */
  function upstreamOf(r: number): number {
    if (r >= ROUTES) return r - ROUTES;
    const moved = r % 97 === 0 && r / 97 < 10;
    return moved ? (r + 250) % UPSTREAMS : r % UPSTREAMS;
  }

  /** Every route's answer through `dp`: the server that replied, or the status when not 200. */
  async function answersOf(dp: DataPlane): Promise<Map<number, string>> {
    const answers = new Map<number, string>();
    const routes = [...expected.keys()];
    // A few requests in flight at once: enough to be quick, few enough for a 2-core machine.
    const lanes = Array.from({ length: 16 }, async (_, lane) => {
      for (let i = lane; i < routes.length; i += 16) {
        const r = routes[i]!;
        const response = await send(`${dp.proxyUrl}/r/${r}/item`);
        const name = (response.json as { upstream?: string } | undefined)?.upstream;
        answers.set(r, response.status === 200 && name ? name : `status ${response.status}`);
      }
    });
    await Promise.all(lanes);
    return new Map([...answers].sort(([a], [b]) => a - b));
  }

  /** Routes whose answer is not what the applied config says, as "r-N: got X, want Y". */
  function mismatches(answers: Map<number, string>): string[] {
    const wrong: string[] = [];
    for (const [r, want] of expected) {
      const got = answers.get(r);
      const wanted = want ?? "status 404";
      if (got !== wanted) wrong.push(`r-${r}: got ${got}, want ${wanted}`);
    }
    return wrong.slice(0, 20);
  }
});

type DumpedSnapshot = Record<string, { name: string }[] | undefined>;

/** The resources of a /config_dump, each kind sorted by name: order is not part of the config. */
function resourcesOf(dump: unknown): Record<string, unknown[]> {
  const snapshot = (dump as { snapshot: DumpedSnapshot }).snapshot;
  const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : 1);
  const kinds = ["routes", "upstreams", "breakers", "tenants"];
  return Object.fromEntries(kinds.map((kind) => [kind, [...(snapshot[kind] ?? [])].sort(byName)]));
}

async function waitForVersion(dp: DataPlane, version: number): Promise<void> {
  await waitFor(async () => ((await dp.snapshotVersion()) ?? 0) >= version, {
    what: `${dp.nodeId} to apply version ${version}`,
    timeoutMs: 60_000,
  });
}

async function controlPlaneMetrics(cp: ControlPlane): Promise<string> {
  const response = await fetch(`${cp.adminUrl}/metrics`, {
    headers: { authorization: `Bearer ${cp.token}` },
    signal: AbortSignal.timeout(10_000),
  });
  return response.text();
}
