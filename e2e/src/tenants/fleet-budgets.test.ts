import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scriptedModel } from "../fleet-quota/scripted-model.js";
import {
  type ScriptedUpstream,
  startScriptedUpstream,
} from "../request-healing/scripted-upstream.js";
import {
  BURST_KEY,
  budgetFleetResources,
  type ControlPlane,
  type DataPlane,
  errorCodeOf,
  type FreshAnswer,
  FreshConnections,
  LIMITED_KEY,
  metricSum,
  runAgainstRateLimit,
  SPENDER_KEY,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";

// Issue 12 with real processes: one control plane, two data-plane binaries sharing a tenant's
// traffic, a scripted OpenAI-style upstream, API keys over HTTP. The minute window is an hour
// long so the rate-limit run cannot straddle two windows; the day window is 8 s so the token
// budget resets within the test.
describe("fleet-wide tenant budgets through two real data planes", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let a: DataPlane;
  let b: DataPlane;
  let model: ScriptedUpstream;

  beforeAll(async () => {
    model = await startScriptedUpstream(scriptedModel);
    teardown.add("model upstream", () => model.close());
    cp = await startControlPlane({
      CLAWGATE_QUOTA_MINUTE_MS: "3600000",
      CLAWGATE_QUOTA_DAY_MS: "8000",
    });
    teardown.add("control plane", () => cp.stop());
    const write = await cp.admin.apply(budgetFleetResources(model.address));
    const env = { CLAWGATE_CP_ADDRESSES: cp.grpcAddress };
    [a, b] = await Promise.all([startDataPlane(env), startDataPlane(env)]);
    teardown.add("data plane a", () => a.stop());
    teardown.add("data plane b", () => b.stop());
    await waitForConvergence(cp, [a, b], { atLeast: write.revision ?? 1 });
  }, 60_000);

  afterAll(() => teardown.run(), 30_000);

  const client = new FreshConnections(teardown, 5_000);
  const call = (dp: DataPlane, path: string, key: string) =>
    client.send(`${dp.proxyUrl}${path}`, { authorization: `Bearer ${key}` });
  const fleetMetric = async (name: string, labels: Record<string, string>) =>
    metricSum(await a.metrics(), name, labels) + metricSum(await b.metrics(), name, labels);

  it("does not refuse a tenant under its limit while its first share is on its way", async () => {
    // 8 requests at once, the first of the window: no lease has arrived for any of them.
    const statuses = await Promise.all(
      Array.from({ length: 8 }, async () => (await call(a, "/v1/burst", BURST_KEY)).status),
    );
    expect(statuses).toEqual(Array(8).fill(200));
  });

  it("holds requestsPerMinute 20 across both data planes: 18-24 of 60 pass, the rest 429 with Retry-After", async () => {
    const { admitted, refused } = await runAgainstRateLimit(60, (i) =>
      call(i % 2 === 0 ? a : b, "/v1/ping", LIMITED_KEY),
    );
    expect(admitted).toBeGreaterThanOrEqual(18);
    expect(admitted).toBeLessThanOrEqual(24);
    // What clients saw is what the two data planes count, by code.
    const labels = { tenant: "limited" };
    expect(await fleetMetric("clawgate_tenant_requests_total", { ...labels, code: "200" })).toBe(
      admitted,
    );
    expect(await fleetMetric("clawgate_tenant_requests_total", { ...labels, code: "429" })).toBe(
      refused,
    );
  }, 60_000);

  it("spends a token budget with JSON usage on one data plane and SSE usage on the other, answers 429 until the window resets", async () => {
    // Each call reports 60 tokens of a 100-token budget. Spend until either data plane refuses:
    // a loop, not two calls, so a window that resets half-way only makes it go round again.
    let exhausted: FreshAnswer | undefined;
    await waitFor(
      async () => {
        for (const [dp, path] of [
          [a, "/v1/chat/json"],
          [b, "/v1/chat/sse"],
        ] as const) {
          const response = await call(dp, path, SPENDER_KEY);
          if (response.status === 429) {
            exhausted = response;
            return true;
          }
          expect(response.status).toBe(200);
        }
        return false;
      },
      { what: "the token budget spent", timeoutMs: 20_000 },
    );
    expect(errorCodeOf(exhausted!.text)).toBe("CLAWGATE_TOKEN_BUDGET_EXHAUSTED");
    expect(Number(exhausted!.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    // Both usages were read: a counted JSON responses, b counted SSE ones.
    const tokens = { tenant: "spender" };
    expect(metricSum(await a.metrics(), "clawgate_tenant_tokens_total", tokens)).toBeGreaterThan(0);
    expect(metricSum(await b.metrics(), "clawgate_tenant_tokens_total", tokens)).toBeGreaterThan(0);
    // The window resets (8 s): calls that report no usage go through on both data planes again.
    for (const dp of [a, b]) {
      await waitFor(async () => (await call(dp, "/v1/ok", SPENDER_KEY)).status === 200, {
        what: `the token budget back on ${dp.nodeId} after the window reset`,
        timeoutMs: 15_000,
      });
    }
  }, 60_000);
});
