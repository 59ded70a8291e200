import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
} from "./support/index.js";

interface Dump {
  version: number;
  snapshot: { routes?: unknown[]; upstreams?: unknown[] };
}

/**
 * Issue 9: an apply far over etcd's default transaction limits (128 operations, 1.5 MiB) goes
 * through one POST on a real control plane, and the data plane goes from the old config to the
 * new one without ever applying a snapshot holding part of it.
 */
describe("one POST /v1/apply of 3,000 resources on etcd with its default limits", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("seed", { nodes: [] });
    await cp.admin.putRoute("seed", { match: { pathPrefix: "/seed" }, upstream: "seed" });
    dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_NODE_ID: "dp-big",
    });
    teardown.add("data plane", () => dp.stop());
  }, 60_000);

  afterAll(() => teardown.run());

  it("applies it whole, and the data plane only ever holds the old or the new config", async () => {
    const before = (await waitFor(
      async () => {
        const dump = (await dp.configDump()) as Dump;
        return dump.snapshot.routes?.length === 1 ? dump : undefined;
      },
      { what: "the data plane to apply the seed config", timeoutMs: 20_000 },
    )) as Dump;
    // Upstreams without nodes: nothing to probe, so the data plane's work is the config alone.
    const resources = [];
    for (let i = 0; i < 1_500; i++) {
      resources.push({ kind: "upstream", name: `u-${i}`, spec: { nodes: [] } });
      resources.push({
        kind: "route",
        name: `r-${i}`,
        spec: { match: { pathPrefix: `/r/${i}` }, upstream: `u-${i}` },
      });
    }

    // Every state the data plane shows while the apply runs, and until it has the result.
    const seen: { version: number; routes: number }[] = [];
    let done = false;
    let revision = Number.POSITIVE_INFINITY;
    const watching = (async () => {
      while (!done) {
        const dump = (await dp.configDump()) as Dump;
        seen.push({ version: dump.version, routes: dump.snapshot.routes?.length ?? 0 });
      }
    })();
    try {
      const started = performance.now();
      const response = await cp.admin.call<{ revision: number; results: unknown[] }>(
        "POST",
        "/v1/apply",
        { resources },
      );
      const took = (performance.now() - started).toFixed(0);
      console.log(`POST /v1/apply of 3,000 resources took ${took} ms`);
      const applied = response.body;
      expect(applied.results).toHaveLength(3_000);
      await waitFor(() => seen.some((state) => state.version >= applied.revision), {
        what: `the data plane to apply version ${applied.revision}`,
        timeoutMs: 30_000,
      });
      revision = applied.revision;
    } finally {
      done = true;
      await watching;
    }

    for (const state of seen) {
      if (state.version < revision) expect(state).toEqual({ version: before.version, routes: 1 });
      else expect(state.routes).toBe(1_501);
    }
  }, 120_000);
});
