import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  metricSum,
  metricValue,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";
import { runLoad, statusOf } from "./load.js";
import { answer, type ScriptedUpstream, startScriptedUpstream } from "./scripted-upstream.js";
import { spawnUpstream, type UpstreamProcess } from "./upstream-process.js";

// One cluster (etcd, control plane, one data plane) and one upstream per story; the stories
// touch disjoint upstreams and routes, so their order does not matter.
describe("request-layer self-healing on real processes", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;
  let flaky: ScriptedUpstream;
  let throttled: ScriptedUpstream;
  let sick: ScriptedUpstream[];
  let catalog: ScriptedUpstream;
  let pair: UpstreamProcess[];

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    flaky = await startScriptedUpstream(answer(500));
    throttled = await startScriptedUpstream(answer(200, "ok"));
    sick = [];
    for (let i = 0; i < 3; i++) sick.push(await startScriptedUpstream(answer(503, "sick")));
    catalog = await startScriptedUpstream(answer(200, "ok"));
    for (const upstream of [flaky, throttled, ...sick, catalog]) {
      teardown.add("scripted upstream", () => upstream.close());
    }
    pair = [await spawnUpstream("a"), await spawnUpstream("b")];
    for (const upstream of pair) teardown.add("upstream process", () => upstream.process.stop());

    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    const nodes = (list: { address: string }[]) => list.map((u) => ({ address: u.address }));
    const write = await cp.admin.apply([
      {
        kind: "breaker",
        name: "trip",
        spec: {
          windowMs: 10_000,
          minRequests: 4,
          failureRatio: 0.5,
          cooldownMs: 3_000,
          maxCooldownMs: 3_000,
          halfOpenSuccesses: 2,
        },
      },
      // Never trips: the budget alone must hold retries down.
      {
        kind: "breaker",
        name: "lenient",
        spec: { minRequests: 100_000, consecutiveFailures: 1_000 },
      },
      { kind: "upstream", name: "flaky", spec: { nodes: nodes([flaky]), breaker: "trip" } },
      { kind: "upstream", name: "throttled", spec: { nodes: nodes([throttled]) } },
      { kind: "upstream", name: "sick", spec: { nodes: nodes(sick), breaker: "lenient" } },
      { kind: "upstream", name: "catalog", spec: { nodes: nodes([catalog]) } },
      { kind: "upstream", name: "pair", spec: { nodes: nodes(pair) } },
      {
        kind: "route",
        name: "flaky",
        spec: { match: { pathPrefix: "/flaky" }, upstream: "flaky", retry: { attempts: 0 } },
      },
      {
        kind: "route",
        name: "throttled",
        spec: { match: { pathPrefix: "/throttled" }, upstream: "throttled" },
      },
      {
        kind: "route",
        name: "sick",
        spec: {
          match: { pathPrefix: "/sick" },
          upstream: "sick",
          retry: { attempts: 2, on: ["connect-failure", "5xx"] },
        },
      },
      {
        kind: "route",
        name: "catalog",
        spec: {
          match: { pathPrefix: "/catalog" },
          upstream: "catalog",
          fallback: { staleIfErrorSeconds: 300 },
        },
      },
      {
        kind: "route",
        name: "pair",
        spec: {
          match: { pathPrefix: "/pair" },
          upstream: "pair",
          retry: { attempts: 2, on: ["connect-failure", "reset", "5xx"] },
        },
      },
    ]);
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
  });

  afterAll(() => teardown.run());

  it("trips the breaker on 500s, answers 503 + Retry-After without contacting the upstream, closes via half-open", async () => {
    const url = `${dp.proxyUrl}/flaky/x`;
    let open: { retryAfter: string | null; code: string } | undefined;
    for (let i = 0; i < 40 && open === undefined; i++) {
      const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      const text = await response.text();
      if (response.status === 503) {
        open = {
          retryAfter: response.headers.get("retry-after"),
          code: JSON.parse(text).error.code,
        };
      } else {
        expect(response.status).toBe(500);
      }
    }
    expect(open, "the breaker never opened").toBeDefined();
    expect(open!.code).toBe("CLAWGATE_BREAKER_OPEN");
    expect(Number(open!.retryAfter)).toBeGreaterThanOrEqual(1);
    const hitsWhenOpen = flaky.hits.length;
    expect(hitsWhenOpen).toBeLessThanOrEqual(4);

    // Within the 3 s cooldown nothing reaches the upstream.
    for (let i = 0; i < 10; i++) {
      const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      expect(response.status).toBe(503);
      expect(Number(response.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      await response.arrayBuffer();
    }
    expect(flaky.hits.length).toBe(hitsWhenOpen);
    const metrics = await dp.metrics();
    expect(metricValue(metrics, "clawgate_breaker_state", { upstream: "flaky" })).toBe(2);
    expect(
      metricValue(metrics, "clawgate_breaker_rejections_total", { upstream: "flaky" }),
    ).toBeGreaterThanOrEqual(11);
    const opened = dp.process.output
      .grep('"to":"open"')
      .find((l) => l.includes('"upstream":"flaky"'));
    expect(opened).toContain('"from":"closed"');

    // The upstream recovers; after the cooldown two probes close the breaker.
    flaky.script = answer(200, "recovered");
    await waitFor(async () => (await statusOf(url)).status === 200, {
      what: "the flaky route to answer 200 again",
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    for (let i = 0; i < 5; i++) expect((await statusOf(url)).status).toBe(200);
    const after = await dp.metrics();
    expect(metricValue(after, "clawgate_breaker_state", { upstream: "flaky" })).toBe(0);
    expect(
      metricValue(after, "clawgate_breaker_transitions_total", {
        upstream: "flaky",
        from: "half-open",
        to: "closed",
      }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      dp.process.output.grep('"from":"half-open"').some((l) => l.includes('"to":"closed"')),
    ).toBe(true);
  }, 40_000);

  it("treats 429 Retry-After: 3 as binding: the upstream receives nothing for 3 s", async () => {
    let throttleNext = true;
    throttled.script = (_req, res) => {
      if (throttleNext) {
        throttleNext = false;
        res.writeHead(429, { "retry-after": "3" }).end("slow down");
      } else {
        res.writeHead(200).end("ok");
      }
    };
    const url = `${dp.proxyUrl}/throttled/x`;
    const statuses: number[] = [];
    const codes = new Set<string>();
    // A client at its own pace until the upstream answers again: the loop ends on that event,
    // not after a fixed time a loaded machine might spend before the cooldown is even over.
    for (let i = 0; i < 2_000 && (statuses.length < 2 || statuses.at(-1) !== 200); i++) {
      const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      statuses.push(response.status);
      const text = await response.text();
      if (response.status === 503) codes.add(JSON.parse(text).error.code);
      await new Promise((resolve) => setTimeout(resolve, 20)); // a client's pace, not a wait
    }
    const [t, ...rest] = throttled.hits;
    expect(statuses[0]).toBe(429);
    expect(t).toBeDefined();
    expect(rest.length, "the upstream got traffic again after the cooldown").toBeGreaterThan(0);
    // A lower bound only, which a slow machine can only widen: the proxy starts the 3 s after
    // the upstream sent the 429.
    const early = rest.filter((hit) => hit < t! + 3_000);
    expect(early, "requests inside [t, t+3s)").toEqual([]);
    const cooled = statuses.filter((s) => s === 503).length;
    expect(cooled, "requests answered during the cooldown").toBeGreaterThan(0);
    expect(statuses.slice(1, -1)).toEqual(Array(statuses.length - 2).fill(503));
    expect([...codes]).toEqual(["CLAWGATE_UPSTREAM_COOLDOWN"]);
    expect(
      metricValue(await dp.metrics(), "clawgate_breaker_retry_after_skips_total", {
        upstream: "throttled",
      }),
    ).toBe(cooled);
  }, 20_000);

  it("loses no GET and no later POST when one of two nodes is killed with SIGKILL mid-load", async () => {
    let killedAt = Number.POSITIVE_INFINITY;
    let completed = 0;
    let completedAfterKill = 0;
    const body = JSON.stringify({ hello: "world" });
    // Three clients in a closed loop: never more retries in flight than the budget's floor
    // (3), so every GET that meets the dying node may go again. With more concurrency a burst
    // of resets beyond 20 % of active requests is, by design, not all retried.
    const load = runLoad({
      workers: 3,
      // Until 120 requests ran after the kill, however long a loaded machine takes; 25 s guard.
      durationMs: 25_000,
      maxRequests: 20_000,
      until: () => completedAfterKill >= 120,
      send: async (index) => {
        const post = index % 3 === 0;
        const result = await statusOf(`${dp.proxyUrl}/pair/${index}`, {
          method: post ? "POST" : "GET",
          ...(post ? { body, headers: { "content-type": "application/json" } } : {}),
        });
        completed++;
        if (killedAt !== Number.POSITIVE_INFINITY) completedAfterKill++;
        return { ...result, detail: `${post ? "POST" : "GET"} ${result.detail ?? ""}` };
      },
    });
    await waitFor(() => completed >= 200, { what: "200 requests before the kill" });
    await pair[0]!.process.kill();
    killedAt = Date.now();
    const outcomes = await load;

    const gets = outcomes.filter((o) => o.detail?.startsWith("GET"));
    const posts = outcomes.filter((o) => o.detail?.startsWith("POST"));
    const afterKill = outcomes.filter((o) => o.startedAt >= killedAt);
    expect(afterKill.length, "load went on after the kill").toBeGreaterThanOrEqual(100);
    expect(gets.filter((o) => o.status !== 200)).toEqual([]);
    expect(posts.filter((o) => o.startedAt >= killedAt && o.status !== 200)).toEqual([]);
    // Only a POST in flight on the killed node may fail, and only with 502.
    for (const failed of posts.filter((o) => o.status !== 200)) expect(failed.status).toBe(502);
    const metrics = await dp.metrics();
    console.log(
      `[request-healing] kill: ${outcomes.length} requests (${afterKill.length} after the kill), ` +
        `failed POSTs in flight: ${posts.filter((o) => o.status !== 200).length}, ` +
        `retries: ${metricSum(metrics, "clawgate_retries_total", { upstream: "pair" })}`,
    );
  }, 30_000);

  it("holds upstream hits well under the 2x of every request retrying, when every attempt fails (retry budget)", async () => {
    const hitsBefore = sick.reduce((sum, u) => sum + u.hits.length, 0);
    const outcomes = await runLoad({
      workers: 20,
      durationMs: 3_000,
      maxRequests: 20_000,
      send: () => statusOf(`${dp.proxyUrl}/sick/x`),
    });
    const hits = sick.reduce((sum, u) => sum + u.hits.length, 0) - hitsBefore;
    const retries = metricSum(await dp.metrics(), "clawgate_retries_total", { upstream: "sick" });
    const ratio = hits / outcomes.length;
    console.log(
      `[request-healing] budget: ${outcomes.length} client requests, ${hits} upstream hits ` +
        `(ratio ${ratio.toFixed(3)}), ${retries} retries`,
    );
    expect(outcomes.every((o) => o.status === 503)).toBe(true);
    expect(retries, "retries happened at all").toBeGreaterThan(0);
    expect(hits).toBe(outcomes.length + retries);
    // The budget caps retries in flight (20 % of the requests in flight, at least 3), not
    // retries per request: a retried request stays in flight longer, so at 20 in flight up to
    // a quarter of requests retry, and more while fewer are in flight (the floor of 3; the
    // test's own clients are slower on a busy machine; measured here: 1.16 to 1.23). Without the
    // budget every request here would retry once: 2x.
    expect(ratio).toBeLessThan(1.5);
  }, 30_000);

  it("serves a GET route's last good response, marked stale, while its upstream is down", async () => {
    catalog.script = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" }).end('{"items":[1,2,3]}');
    };
    const url = `${dp.proxyUrl}/catalog/items?page=1`;
    const fresh = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    expect(fresh.status).toBe(200);
    expect(fresh.headers.get("x-clawgate-cache")).toBeNull();
    expect(await fresh.json()).toEqual({ items: [1, 2, 3] });

    await catalog.close();
    for (let i = 0; i < 3; i++) {
      const stale = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      expect(stale.status).toBe(200);
      expect(stale.headers.get("x-clawgate-cache")).toBe("stale");
      expect(Number(stale.headers.get("age"))).toBeGreaterThanOrEqual(0);
      expect(await stale.json()).toEqual({ items: [1, 2, 3] });
    }
    const write = await statusOf(url, { method: "POST", body: "{}" });
    expect([502, 503]).toContain(write.status);
    const uncached = await statusOf(`${dp.proxyUrl}/catalog/other`);
    expect([502, 503]).toContain(uncached.status);
  });
});
