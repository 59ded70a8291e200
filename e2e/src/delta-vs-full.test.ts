import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  type NamedUpstream,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitForConvergence,
  whoAnswered,
} from "./support/index.js";

/**
 * Issue 9: a data plane that followed a config change by change (deltas, once the control
 * plane sends them) serves exactly what a data plane that got the same version whole does.
 * Both are compared on the config they hold and on which upstream answers each route.
 */

const UPSTREAMS = 4;
const ROUTES = 40;
const CHANGES = 30;

type Snapshot = Record<string, { name: string }[] | undefined>;

/** The resources of a /config_dump, each kind sorted by name: order is not part of the config. */
function resourcesOf(dump: unknown): Record<string, unknown[]> {
  const snapshot = (dump as { snapshot: Snapshot }).snapshot;
  const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : 1);
  const kinds = ["routes", "upstreams", "breakers", "tenants"];
  return Object.fromEntries(kinds.map((kind) => [kind, [...(snapshot[kind] ?? [])].sort(byName)]));
}

describe("a data plane fed change by change, and one fed the whole snapshot", () => {
  const teardown = new Teardown();
  const nodes: NamedUpstream[] = [];
  let cp: ControlPlane;
  let following: DataPlane;
  /** Route name -> upstream it should reach; undefined once deleted. */
  const expected = new Map<string, string | undefined>();

  const route = (upstream: string, path: string) => ({ match: { pathPrefix: path }, upstream });

  beforeAll(async () => {
    for (let u = 0; u < UPSTREAMS; u++) {
      const node = await startNamedUpstream(`u-${u}`);
      teardown.add(`upstream u-${u}`, () => node.close());
      nodes.push(node);
    }
    cp = await startControlPlane({ CLAWGATE_LOG_LEVEL: "warn" });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.apply([
      ...nodes.map((node) => ({
        kind: "upstream" as const,
        name: node.name,
        spec: { nodes: [{ address: node.address }] },
      })),
      ...Array.from({ length: ROUTES }, (_, i) => {
        expected.set(`r-${i}`, `u-${i % UPSTREAMS}`);
        return {
          kind: "route" as const,
          name: `r-${i}`,
          spec: route(`u-${i % UPSTREAMS}`, `/r-${i}`),
        };
      }),
    ]);
    following = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("following data plane", () => following.stop());
    await waitForConvergence(cp, [following]);
  }, 60_000);

  afterAll(() => teardown.run());

  it("serve the same config, every route from the same upstream", {
    timeout: 120_000,
  }, async () => {
    for (let change = 1; change <= CHANGES; change++) {
      // Moves a route to another upstream, deletes one now and then, adds a new one.
      const moved = `r-${change % ROUTES}`;
      const upstream = `u-${(change + 1) % UPSTREAMS}`;
      let written = await cp.admin.putRoute(moved, route(upstream, `/${moved}`));
      expected.set(moved, upstream);
      if (change % 4 === 0) {
        const gone = `r-${(change + 7) % ROUTES}`;
        if (expected.get(gone) !== undefined) {
          written = await cp.admin.delete("routes", gone);
          expected.set(gone, undefined);
        }
      }
      if (change % 5 === 0) {
        const added = `n-${change}`;
        written = await cp.admin.putRoute(added, route("u-0", `/${added}`));
        expected.set(added, "u-0");
      }
      // Each change applied before the next, so the data plane follows version by version.
      await waitForConvergence(cp, [following], { atLeast: written.revision ?? 0 });
    }

    const whole = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("whole-snapshot data plane", () => whole.stop());
    const version = await waitForConvergence(cp, [following, whole]);

    const [followed, fresh] = await Promise.all([following.configDump(), whole.configDump()]);
    expect(followed).toMatchObject({ version, source: "control-plane" });
    expect(fresh).toMatchObject({ version, source: "control-plane" });
    expect(resourcesOf(followed)).toEqual(resourcesOf(fresh));

    for (const [name, upstream] of expected) {
      if (upstream === undefined) continue;
      expect(await whoAnswered(`${following.proxyUrl}/${name}/x`)).toBe(upstream);
      expect(await whoAnswered(`${whole.proxyUrl}/${name}/x`)).toBe(upstream);
    }
    expect(following.process.output.grep("snapshot refused")).toHaveLength(0);
  });
});
