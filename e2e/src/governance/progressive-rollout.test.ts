import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AdminClient,
  type ApplyResource,
  type ControlPlane,
  type DataPlane,
  runClawctl,
  send,
  startControlPlane,
  startDataPlane,
  Teardown,
  VersionWatch,
  waitFor,
  waitForConvergence,
  whoAnswered,
} from "../support/index.js";
import {
  type Rollout,
  rolloutEnded,
  rolloutIn as rolloutInState,
  startRollout as startRolloutOn,
} from "./rollout-steps.js";
import {
  type RolloutUpstreams,
  routeToBroken,
  routeToGood,
  startRolloutUpstreams,
} from "./rollout-upstreams.js";

interface ErrorBody {
  error: { code: string; message: string };
}

/**
 * Issue 13, progressive rollout: two data planes, dp-a (the canary: canaries are the first
 * connected data planes by node id) and dp-b. The steps share one fleet and run in order.
 */
describe("progressive rollout on etcd with two data planes", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dpA: DataPlane;
  let dpB: DataPlane;
  let upstreams: RolloutUpstreams;
  let env: Record<string, string>;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    upstreams = await startRolloutUpstreams(teardown);
    env = { CLAWGATE_ADMIN_URL: cp.adminUrl, CLAWGATE_ADMIN_TOKEN: cp.token };
    const applied = await cp.admin.apply(routeToGood(upstreams));
    dpA = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_NODE_ID: "dp-a" });
    teardown.add("dp-a", () => dpA.stop());
    dpB = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_NODE_ID: "dp-b" });
    teardown.add("dp-b", () => dpB.stop());
    // Not an earlier version published before the apply: the one holding its resources.
    await waitForConvergence(cp, [dpA, dpB], {
      atLeast: (applied.body as { revision: number }).revision,
    });
  }, 60_000);
  afterAll(() => teardown.run());

  const clawctl = (...args: string[]) => runClawctl(args, env);

  const startRollout = (resources: ApplyResource[], bakeSeconds: number) =>
    startRolloutOn(cp, dpA, resources, bakeSeconds);
  const rolloutIn = (state: Rollout["state"]) => rolloutInState(cp, state);

  it("rolls a canary seeing 5xx back on its own; the other data plane never gets the version", async () => {
    // Every version dp-b shows while the rollout runs and until it has the rollback.
    const watch = new VersionWatch(dpB);
    try {
      const bad = await startRollout(routeToBroken(upstreams), 600);
      // The canary serves the bad config: its clients see 5xx (500, then 503 once the breaker opens).
      for (let i = 0; i < 20; i++) {
        expect((await send(`${dpA.proxyUrl}/api/x`)).status).toBeGreaterThanOrEqual(500);
      }
      const rolledBack = await rolloutIn("rolled-back");
      expect(rolledBack).toMatchObject({ version: bad, canaries: ["dp-a"] });
      expect(rolledBack.reason).toMatch(/^canaries failing: canary 5xx ratio 1\.00/);
      const restored = rolledBack.rollbackVersion as number;
      await waitForConvergence(cp, [dpA, dpB], { atLeast: restored });
      expect(await whoAnswered(`${dpA.proxyUrl}/api/x`)).toBe("good");
      // The watcher's own reads reach the restored version (or a later one: writes after the
      // rollback, such as the rollout's own state, may publish again), then it stops.
      await watch.reached(restored, 10_000);
      await watch.stop();
      // Nothing from the rolled-out version up to the rollback.
      const between = [...watch.seen].filter((v) => v !== undefined && v >= bad && v < restored);
      expect(between).toEqual([]);

      // Journaled with why, as a rollback in the config events and the history.
      const events = await cp.admin.call<{
        items: { token: string; rollback?: { reason?: string } }[];
      }>("GET", "/v1/events?type=config&limit=1");
      expect(events.body.items[0]?.token).toBe("rollout");
      expect(events.body.items[0]?.rollback?.reason).toContain("canary 5xx ratio");
    } finally {
      await watch.stop();
    }
  }, 90_000);

  it("rolls a canary that NACKs the version back, with the NACK's reason, rather than promoting it", async () => {
    const watch = new VersionWatch(dpB);
    try {
      // A CA file the data plane cannot read: the control plane accepts it, the canary refuses it.
      const applied = await cp.admin.call<{ revision: number }>("POST", "/v1/apply", {
        resources: [
          {
            kind: "upstream",
            name: "secure",
            spec: {
              nodes: [{ address: upstreams.good.address }],
              tls: { caFile: "/nonexistent/clawgate-ca.pem" },
            },
          },
          {
            kind: "route",
            name: "secure",
            spec: { match: { pathPrefix: "/secure" }, upstream: "secure" },
          },
        ],
        // Its bake time runs out long before the leader could miss the NACK.
        rollout: { canary: 1, bakeSeconds: 1, maxErrorRatio: 0.05, minRequests: 10 },
      });
      expect(applied.status).toBe(200);
      const version = applied.body.revision;
      const ended = await rolloutEnded(cp);
      expect(ended).toMatchObject({ state: "rolled-back", version, canaries: ["dp-a"] });
      expect(ended.reason).toMatch(
        /^canaries failing: canary NACK: dp-a refused version \d+: upstream "secure": tls\.caFile cannot read \/nonexistent\/clawgate-ca\.pem/,
      );
      const restored = ended.rollbackVersion as number;
      await waitForConvergence(cp, [dpA, dpB], { atLeast: restored });
      expect((await send(`${dpA.proxyUrl}/secure/x`)).status).toBe(404);
      await watch.reached(restored, 10_000);
      await watch.stop();
      // dp-b never had the refused version.
      const between = [...watch.seen].filter(
        (v) => v !== undefined && v >= version && v < restored,
      );
      expect(between).toEqual([]);
    } finally {
      await watch.stop();
    }
  }, 90_000);

  it("refuses another apply while one bakes, and promotes by hand (clawctl)", async () => {
    const base = (await cp.admin.snapshot()).version;
    const version = await startRollout(
      [{ kind: "route", name: "v2", spec: { match: { pathPrefix: "/v2" }, upstream: "good" } }],
      600,
    );
    const refused = await cp.admin.request<ErrorBody>("POST", "/v1/apply", {
      resources: [
        { kind: "route", name: "v3", spec: { match: { pathPrefix: "/v3" }, upstream: "good" } },
      ],
    });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("CLAWGATE_ROLLOUT_IN_PROGRESS");
    expect(refused.body.error.message).toContain(`rollout of version ${version}`);

    // Baking for 600 s: dp-b is still on the version before.
    expect(await dpB.snapshotVersion()).toBe(base);
    expect((await send(`${dpB.proxyUrl}/v2/x`)).status).toBe(404);
    const status = await clawctl("rollout", "status");
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/STATE:\s+baking/);
    expect(status.stdout).toMatch(/CANARIES:\s+dp-a/);
    const fleet = await clawctl("status");
    expect(fleet.stdout).toMatch(/ROLLOUT\n\s+STATE:\s+baking/);

    const promoted = await clawctl("rollout", "promote");
    expect(promoted.code, promoted.stderr).toBe(0);
    expect(promoted.stdout).toContain(`version ${version} promoted`);
    await waitForConvergence(cp, [dpA, dpB], { atLeast: version });
    expect(await whoAnswered(`${dpB.proxyUrl}/v2/x`)).toBe("good");
  }, 90_000);

  it("aborts by hand (clawctl): the base version's config comes back everywhere", async () => {
    await startRollout(
      [{ kind: "route", name: "v4", spec: { match: { pathPrefix: "/v4" }, upstream: "good" } }],
      600,
    );
    expect((await send(`${dpA.proxyUrl}/v4/x`)).status).toBe(200);
    const aborted = await clawctl("rollout", "abort");
    expect(aborted.code, aborted.stderr).toBe(0);
    const rollout = (await cp.admin.call<Rollout>("GET", "/v1/rollout")).body;
    expect(rollout.state).toBe("rolled-back");
    expect(rollout.reason).toMatch(/^aborted by /);
    await waitForConvergence(cp, [dpA, dpB], { atLeast: rollout.rollbackVersion });
    expect((await send(`${dpA.proxyUrl}/v4/x`)).status).toBe(404);
  }, 90_000);

  it("holds a version past its bake time until the canary served minRequests, then promotes it", async () => {
    const held = cp.process.output.count("rollout inconclusive at the end of its bake time");
    const version = await startRollout(
      [{ kind: "route", name: "v5", spec: { match: { pathPrefix: "/v5" }, upstream: "good" } }],
      1,
    );
    // No request reached the canary: at the end of its bake time the leader holds it.
    await waitFor(() => held() > 0, { what: "the leader to hold the rollout", timeoutMs: 20_000 });
    const waiting = (await cp.admin.call<Rollout>("GET", "/v1/rollout")).body;
    expect(waiting.state).toBe("baking");
    expect(waiting.verdict).toEqual({
      kind: "inconclusive",
      reason: "canaries answered 0 of the minRequests 10 requests on the version",
    });
    expect((await send(`${dpB.proxyUrl}/v5/x`)).status).toBe(404);
    for (let i = 0; i < 10; i++) expect((await send(`${dpA.proxyUrl}/v5/x`)).status).toBe(200);
    const promoted = await rolloutIn("promoted");
    expect(promoted.reason).toBe("baked 1 s without failing");
    await waitForConvergence(cp, [dpA, dpB], { atLeast: version });
    expect(await whoAnswered(`${dpB.proxyUrl}/v5/x`)).toBe("good");
  }, 90_000);

  it("carries a baking rollout on across a control-plane restart", async () => {
    const base = (await cp.admin.snapshot()).version;
    const version = await startRollout(
      [{ kind: "route", name: "v6", spec: { match: { pathPrefix: "/v6" }, upstream: "good" } }],
      600,
    );
    await cp.kill();
    // Same ports and token (cp.env), same etcd: the data planes reconnect to it.
    cp = await startControlPlane(cp.env);
    const rollout = (await cp.admin.call<Rollout>("GET", "/v1/rollout")).body;
    expect(rollout).toMatchObject({ state: "baking", version, baseVersion: base });
    await waitFor(
      async () => {
        const fleet = await cp.admin.dataplanes();
        return ["dp-a", "dp-b"].every((id) =>
          fleet.some((dp) => dp.nodeId === id && dp.state !== "DISCONNECTED"),
        );
      },
      { what: "both data planes to reconnect", timeoutMs: 30_000 },
    );
    // The new process holds dp-b where it is; only the canary has the version.
    expect(await dpB.snapshotVersion()).toBe(base);
    expect(await dpA.snapshotVersion()).toBeGreaterThanOrEqual(version);
    await cp.admin.call("POST", "/v1/rollout/promote");
    await waitForConvergence(cp, [dpA, dpB], { atLeast: version });
    expect(await whoAnswered(`${dpB.proxyUrl}/v6/x`)).toBe("good");
  }, 90_000);

  it("lets a viewer read the rollout and refuses it promote and abort", async () => {
    const created = await clawctl("token", "create", "watcher", "--role", "viewer");
    expect(created.code, created.stderr).toBe(0);
    const viewer = new AdminClient(cp.adminUrl, created.stdout.trim());
    expect((await viewer.request("GET", "/v1/rollout")).status).toBe(200);
    for (const action of ["promote", "abort"]) {
      const refused = await viewer.request<ErrorBody>("POST", `/v1/rollout/${action}`);
      expect(refused.status).toBe(403);
      expect(refused.body.error.message).toContain("needs role editor");
    }
    const nothing = await cp.admin.request<ErrorBody>("POST", "/v1/rollout/promote");
    expect(nothing.status).toBe(404);
    expect(nothing.body.error.message).toBe("no rollout is baking");
  });
});
