import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ApplyResource,
  type ControlPlane,
  type DataPlane,
  type NamedUpstream,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitForConvergence,
  whoAnswered,
} from "../support/index.js";

/** Routes in each config; with their padding, about 1.4 MiB stored. */
const ROUTES = 600;
const PAD = 2_000;

/**
 * Issue 13: undoing a write is as big as the write; a config over 1 MiB (beyond what one etcd
 * commit takes) used to lose its undo steps, so no rollback could cross it.
 */
describe("rollback across configs bigger than 1 MiB on etcd with its default limits", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;
  let one: NamedUpstream;
  let two: NamedUpstream;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    one = await startNamedUpstream("one");
    teardown.add("upstream one", () => one.close());
    two = await startNamedUpstream("two");
    teardown.add("upstream two", () => two.close());
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
  }, 60_000);
  afterAll(() => teardown.run());

  /** Every route's path prefix padded out with `fill`, all sent to `upstream`. */
  function config(upstream: NamedUpstream, fill: string): ApplyResource[] {
    const resources: ApplyResource[] = [
      { kind: "upstream", name: upstream.name, spec: { nodes: [{ address: upstream.address }] } },
    ];
    for (let i = 0; i < ROUTES; i++) {
      resources.push({
        kind: "route",
        name: `r-${i}`,
        spec: {
          match: { pathPrefix: `/r/${i}/${fill.repeat(PAD)}` },
          upstream: upstream.name,
        },
      });
    }
    return resources;
  }

  async function applyPruned(resources: ApplyResource[]): Promise<number> {
    const body = JSON.stringify({ resources });
    expect(body.length).toBeGreaterThan(1024 * 1024);
    const response = await cp.admin.call<{ revision: number }>("POST", "/v1/apply", {
      resources,
      prune: true,
    });
    return response.body.revision;
  }

  async function rollback(version: number): Promise<number> {
    const response = await cp.admin.request<{ revision: number; error?: unknown }>(
      "POST",
      "/v1/rollback",
      { version },
    );
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    return response.body.revision;
  }

  it("rolls back over a write that replaced every route, and back again", async () => {
    const v1 = await applyPruned(config(one, "a"));
    const v2 = await applyPruned(config(two, "b"));
    await waitForConvergence(cp, [dp], { atLeast: v2, timeoutMs: 30_000 });
    expect(await whoAnswered(`${dp.proxyUrl}/r/7/${"b".repeat(PAD)}/x`)).toBe("two");

    // Undoes v2, whose undo steps hold every route as it was (over 1 MiB).
    const back = await rollback(v1);
    await waitForConvergence(cp, [dp], { atLeast: back, timeoutMs: 30_000 });
    expect(await whoAnswered(`${dp.proxyUrl}/r/7/${"a".repeat(PAD)}/x`)).toBe("one");

    // Undoes the rollback itself, a staged write whose undo steps went ahead in its batches.
    const forth = await rollback(v2);
    await waitForConvergence(cp, [dp], { atLeast: forth, timeoutMs: 30_000 });
    expect(await whoAnswered(`${dp.proxyUrl}/r/599/${"b".repeat(PAD)}/x`)).toBe("two");
  }, 120_000);
});
