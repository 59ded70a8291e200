import type { ServerResponse } from "node:http";
import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scriptedModel } from "../fleet-quota/scripted-model.js";
import {
  answer,
  type ScriptedUpstream,
  startScriptedUpstream,
} from "../request-healing/scripted-upstream.js";
import {
  BURST_KEY,
  budgetFleetResources,
  type ControlPlane,
  type DataPlane,
  errorCodeOf,
  FreshConnections,
  LIMITED_KEY,
  metricSum,
  runAgainstRateLimit,
  SPENDER_KEY,
  StopWaiting,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";

// Issue 12 with workers: fleet-wide tenant limits and coordinated half-open probes hold when a
// data plane runs proxy workers. One control plane on etcd, data plane `a` with one process and
// `b` with workers: 2, real upstreams. The quota windows are an hour long, so no run straddles
// two windows.
describe("fleet limits and fleet probes with a workers: 2 data plane", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let a: DataPlane;
  let b: DataPlane;
  let model: ScriptedUpstream;
  let flaky: ScriptedUpstream;
  // A new connection per request, so b's workers take them in turn.
  const client = new FreshConnections(teardown, 15_000);
  const call = (dp: DataPlane, path: string, key?: string) =>
    client.send(
      `${dp.proxyUrl}${path}`,
      key === undefined ? {} : { authorization: `Bearer ${key}` },
    );

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    model = await startScriptedUpstream(scriptedModel);
    teardown.add("model upstream", () => model.close());
    flaky = await startScriptedUpstream(answer(500));
    teardown.add("flaky upstream", () => flaky.close());
    cp = await startControlPlane({
      CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint,
      CLAWGATE_QUOTA_MINUTE_MS: "3600000",
      CLAWGATE_QUOTA_DAY_MS: "3600000",
    });
    teardown.add("control plane", () => cp.stop());
    const write = await cp.admin.apply([
      ...budgetFleetResources(model.address),
      // One 5xx opens it; the cooldown never grows past 2 s, so every breaker turns half-open
      // within one cooldown of the others, well inside the control plane's 10 s probe claim.
      {
        kind: "breaker",
        name: "fleet",
        spec: {
          consecutiveFailures: 1,
          cooldownMs: 2_000,
          maxCooldownMs: 2_000,
          halfOpenSuccesses: 1,
          fleetProbe: true,
        },
      },
      {
        kind: "upstream",
        name: "flaky",
        spec: { nodes: [{ address: flaky.address }], breaker: "fleet" },
      },
      {
        kind: "route",
        name: "flaky",
        spec: { match: { pathPrefix: "/flaky" }, upstream: "flaky", retry: { attempts: 0 } },
      },
    ]);
    const env = { CLAWGATE_CP_ADDRESSES: cp.grpcAddress };
    // Three node processes start at once: a busy 2-core machine may take its time.
    const start = { readyTimeoutMs: 60_000 };
    [a, b] = await Promise.all([
      startDataPlane(env, start),
      startDataPlane({ ...env, CLAWGATE_WORKERS: "2" }, start),
    ]);
    teardown.add("data plane a", () => a.stop());
    teardown.add("data plane b", () => b.stop());
    // Served, not NACKed: a data plane with workers holds tenant limits and fleet probes now.
    await waitForConvergence(cp, [a, b], { atLeast: write.revision ?? 1 });
  }, 120_000);

  afterAll(() => teardown.run(), 30_000);

  it("does not refuse a tenant under its limit in either worker while their first shares are on their way", async () => {
    const statuses = await Promise.all(
      Array.from({ length: 8 }, async () => (await call(b, "/v1/burst", BURST_KEY)).status),
    );
    expect(statuses).toEqual(Array(8).fill(200));
  });

  it("holds requestsPerMinute 20 across both data planes and b's two workers: 18-24 of 60 pass", async () => {
    // Two of every three to b: each of its workers gets about as many as a.
    const { admitted, refused } = await runAgainstRateLimit(60, (i) =>
      call(i % 3 === 0 ? a : b, "/v1/ping", LIMITED_KEY),
    );
    expect(admitted).toBeGreaterThanOrEqual(18);
    expect(admitted).toBeLessThanOrEqual(24);
    // b's workers count what they answered; its /metrics sums them.
    const count = async (code: string) =>
      metricSum(await a.metrics(), "clawgate_tenant_requests_total", { tenant: "limited", code }) +
      metricSum(await b.metrics(), "clawgate_tenant_requests_total", { tenant: "limited", code });
    expect(await count("200")).toBe(admitted);
    expect(await count("429")).toBe(refused);
  }, 60_000);

  it("debits the tokens b's workers read from responses against the fleet's budget until it refuses", async () => {
    // 60 tokens a response, 100 a day: only debits reported through b's primary spend it.
    const exhausted = await waitFor(
      async () => {
        const response = await call(b, "/v1/chat/json", SPENDER_KEY);
        if (response.status === 429) return response;
        expect(response.status).toBe(200);
        return false;
      },
      { what: "the token budget spent through b's workers", timeoutMs: 20_000, intervalMs: 50 },
    );
    expect(errorCodeOf(exhausted.text)).toBe("CLAWGATE_TOKEN_BUDGET_EXHAUSTED");
    expect(Number(exhausted.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    expect(
      metricSum(await b.metrics(), "clawgate_tenant_tokens_total", { tenant: "spender" }),
    ).toBeGreaterThanOrEqual(100);
  }, 60_000);

  it("sends one half-open probe for the whole fleet, not one per data plane or worker, and closes every breaker on its verdict", async () => {
    /**
     * The states of flaky's breakers (0 closed, 1 half-open, 2 open) summed over a and over b's
     * workers. b's /metrics shows the most open of its workers' states, so its sum is read
     * from the transitions each worker made: every breaker starts closed (0).
     */
    const states = async () => {
      const inA = metricSum(await a.metrics(), "clawgate_breaker_state", { upstream: "flaky" });
      const text = await b.metrics();
      const into = (state: string) =>
        metricSum(text, "clawgate_breaker_transitions_total", { upstream: "flaky", to: state }) -
        metricSum(text, "clawgate_breaker_transitions_total", { upstream: "flaky", from: state });
      return [inA, into("half-open") + 2 * into("open")];
    };
    // Trip the breaker in a and in both of b's workers: each sees a 500 and opens.
    await waitFor(
      async () => {
        await Promise.all([call(a, "/flaky"), call(b, "/flaky"), call(b, "/flaky")]);
        const [inA, inB] = await states();
        return inA === 2 && inB === 4;
      },
      { what: "every breaker open", timeoutMs: 20_000 },
    );
    // The upstream recovers, and holds each request it gets until the test lets it answer.
    const held: ServerResponse[] = [];
    let secondProbe: (reason: Error) => void = () => {};
    const tooMany = new Promise<never>((_, reject) => {
      secondProbe = reject;
    });
    tooMany.catch(() => {});
    /** Resolves when the upstream holds its next request (a probe). */
    let onHold = () => {};
    const nextHold = () =>
      new Promise<void>((resolve) => {
        onHold = resolve;
      });
    flaky.script = (_req, res) => {
      held.push(res);
      onHold();
      if (held.length > 1)
        secondProbe(new StopWaiting(`${held.length} probes reached the upstream`));
    };
    const answered: Promise<unknown>[] = [];
    // Every breaker's cooldown elapses and the requests find them half-open: each asks to
    // probe. One probe reaches the upstream and waits there; every other request is answered
    // (503) without reaching it, until all three breakers are half-open.
    await waitFor(
      async () => {
        for (const dp of [a, b, b]) {
          const hold = nextHold();
          const response = call(dp, "/flaky");
          answered.push(response);
          // Answered, or held at the upstream: then it is the probe and answers once released.
          await Promise.race([response, hold, tooMany]);
        }
        const [inA, inB] = await Promise.race([states(), tooMany]);
        return held.length === 1 && inA === 1 && inB === 2;
      },
      { what: "one probe held and every breaker half-open", timeoutMs: 20_000 },
    );
    // More requests to each half-open breaker: none of them probes as well.
    for (let i = 0; i < 9; i++) {
      const response = await Promise.race([call([a, b, b][i % 3]!, "/flaky"), tooMany]);
      expect(response.status).toBe(503);
    }
    expect(held).toHaveLength(1);
    // The probe succeeds: its breaker closes, and the verdict closes the other two.
    flaky.script = answer(200, "ok");
    held[0]!.writeHead(200, { "content-type": "text/plain" }).end("ok");
    await waitFor(async () => (await states()).every((state) => state === 0), {
      what: "every breaker closed on the one probe's verdict",
    });
    for (const dp of [a, b, b]) expect((await call(dp, "/flaky")).status).toBe(200);
    await Promise.allSettled(answered);
  }, 90_000);
});
