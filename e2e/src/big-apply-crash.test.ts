import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ApplyResource,
  type ControlPlane,
  countEtcdKeys,
  startControlPlane,
  Teardown,
  waitFor,
} from "./support/index.js";

const PREFIX = "/clawgate/";
const GATE = `${PREFIX}meta/apply-gate`;
const OWNERS = `${PREFIX}meta/apply-owner/`;
const UNDO = `${PREFIX}meta/apply-undo/`;

interface Listed {
  items: { name: string }[];
}

/**
 * Issue 9: a control plane killed -9 in the middle of a big apply leaves a gate that refuses
 * every write. Its owner lease is short (here 2 s) and only a live process renews it, so another
 * control plane's write goes through once that lease is gone (not after a fixed 30 s), and the
 * half-written apply is rolled back, never published.
 */
describe("a control plane killed half-way through a 20,000-resource apply", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let dying: ControlPlane;
  let survivor: ControlPlane;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    const env = { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint, CLAWGATE_APPLY_LEASE_TTL_SECONDS: "2" };
    // Two replicas at two admin addresses: the survivor is not the dead one restarted, so it
    // may not take the apply over at once (apply-owner.ts) and has to wait for the lease.
    dying = await startControlPlane(env, { name: "dying-cp" });
    teardown.add("dying control plane", () => dying.stop());
    survivor = await startControlPlane(env, { name: "surviving-cp" });
    teardown.add("surviving control plane", () => survivor.stop());
    await survivor.admin.putUpstream("seed", { nodes: [] });
    await survivor.admin.putRoute("seed", { match: { pathPrefix: "/seed" }, upstream: "seed" });
  }, 60_000);

  afterAll(() => teardown.run());

  it("lets another control plane write once the dead one's lease is gone, and rolls the apply back", async () => {
    const resources: ApplyResource[] = [];
    for (let i = 0; i < 10_000; i++) {
      resources.push({ kind: "upstream", name: `u-${i}`, spec: { nodes: [] } });
      resources.push({
        kind: "route",
        name: `r-${i}`,
        spec: { match: { pathPrefix: `/r/${i}` }, upstream: `u-${i}` },
      });
    }
    // Its answer never comes: the connection dies with the process.
    const applying = dying.admin.request("POST", "/v1/apply", { resources }).catch(() => undefined);

    // Several batches written (each with its undo record), the gate still set: kill -9 there.
    await waitFor(async () => (await countEtcdKeys(etcd.endpoint, UNDO)) >= 3, {
      what: "the apply to write three batches",
      timeoutMs: 60_000,
      intervalMs: 5,
    });
    await dying.kill();
    await applying;
    expect(await countEtcdKeys(etcd.endpoint, GATE)).toBe(1);

    // The survivor refuses writes (409) while the dead owner's lease lasts, then writes.
    const refusals = new Set<string>();
    const written = await waitFor(
      async () => {
        const response = await survivor.admin.request<{ error?: { code?: string } }>(
          "POST",
          "/v1/apply",
          { resources: [{ kind: "breaker", name: "after-crash", spec: {} }] },
        );
        if (response.status === 200) return response;
        refusals.add(`${response.status} ${response.body.error?.code}`);
        return undefined;
      },
      // Well past the 2 s lease and the time to roll back, well short of the old fixed 30 s.
      { what: "the survivor to accept a write", timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(written.status).toBe(200);
    expect([...refusals].filter((refusal) => refusal !== "409 CLAWGATE_STORE_CONFLICT")).toEqual(
      [],
    );

    // Nothing of the dead apply is left: its gate, owner and undo records are gone, and the
    // config holds the seed and the survivor's write alone.
    for (const prefix of [GATE, OWNERS, UNDO]) {
      expect(await countEtcdKeys(etcd.endpoint, prefix)).toBe(0);
    }
    const upstreams = await survivor.admin.call<Listed>("GET", "/v1/upstreams");
    expect(upstreams.body.items.map((item) => item.name)).toEqual(["seed"]);
    const routes = await survivor.admin.call<Listed>("GET", "/v1/routes");
    expect(routes.body.items.map((item) => item.name)).toEqual(["seed"]);
    expect((await survivor.admin.get("breakers", "after-crash")).status).toBe(200);
  }, 120_000);
});
