import { describe, expect, it } from "vitest";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import { attemptLog } from "./attempt-log.js";
import { requestMetrics } from "./request-metrics.js";

async function value(
  world: ReturnType<typeof stageWorld>,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = (await world.registry.getMetricsAsJSON()).find((m) => m.name === name);
  const values = (metric?.values ?? []) as { labels: Record<string, string>; value: number }[];
  return values
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((sum, v) => sum + v.value, 0);
}

describe("request-metrics stage", () => {
  it("counts each request once, under the status the client got", async () => {
    const world = stageWorld();
    const down = fakeDispatch();
    const stage = requestMetrics(world.deps.metrics)(down);
    const ok = world.exchange();
    stage(ok, new RecordingHandler(ok));
    down.attempts[0]!.start().respond(200, {}, "ok");
    const failed = world.exchange();
    stage(failed, new RecordingHandler(failed));
    down.attempts[1]!.start().fail("refused");
    // A late callback of an answered request is not a second request.
    down.attempts[1]!.fail("aborted");
    const total = "clawgate_requests_total";
    expect(await value(world, total, { route: "r", upstream: "u", code: "200" })).toBe(1);
    expect(await value(world, total, { route: "r", upstream: "u", code: "502" })).toBe(1);
  });
});

describe("attempt-log stage", () => {
  it("counts every failed attempt by kind, a 5xx too, and none the proxy ended itself", async () => {
    const world = stageWorld();
    const down = fakeDispatch();
    const stage = attemptLog(world.deps)(down);
    for (let i = 0; i < 3; i++) stage(world.exchange(), new RecordingHandler());
    down.attempts[0]!.start().fail("refused");
    down.attempts[1]!.start().respond(502);
    down.attempts[2]!.start().fail("client_gone");
    const errors = "clawgate_upstream_errors_total";
    expect(await value(world, errors, { upstream: "u", kind: "refused" })).toBe(1);
    expect(await value(world, errors, { upstream: "u", kind: "status_5xx" })).toBe(1);
    expect(await value(world, errors, { upstream: "u" })).toBe(2);
  });
});
