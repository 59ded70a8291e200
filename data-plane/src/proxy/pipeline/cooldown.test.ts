import { describe, expect, it } from "vitest";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import { cooldownGate, cooldownPerAttempt } from "./cooldown.js";

describe("cooldown stages", () => {
  it("a 429 with Retry-After blocks the upstream until the time it named", () => {
    const world = stageWorld();
    const down = fakeDispatch();
    const exchange = world.exchange();
    cooldownPerAttempt(world.deps)(down)(exchange, new RecordingHandler());
    down.attempts[0]!.start().respond(429, { "retry-after": "5" });
    expect(exchange.coolingDown).toBe(true);

    const gated = fakeDispatch();
    const gate = cooldownGate(world.deps)(gated);
    const blocked = new RecordingHandler();
    gate(world.exchange(), blocked);
    expect(blocked.events).toEqual(["failure retry_after"]);
    expect(blocked.failures[0]!.retryAfterMs).toBe(5_000);
    expect(gated.attempts).toHaveLength(0);

    world.clock.advance(5_000);
    gate(world.exchange(), new RecordingHandler());
    expect(gated.attempts).toHaveLength(1);
  });

  it("a 503 without Retry-After starts no cooldown", () => {
    const world = stageWorld();
    const down = fakeDispatch();
    const exchange = world.exchange();
    cooldownPerAttempt(world.deps)(down)(exchange, new RecordingHandler());
    down.attempts[0]!.start().respond(503);
    expect(exchange.coolingDown).toBe(false);
    expect(world.deps.healing.upstream("u")!.cooldown.check().ok).toBe(true);
  });

  it("checks the gate again for a retry, not for the first attempt", () => {
    const world = stageWorld();
    world.deps.healing.upstream("u")!.cooldown.blockFor(1_000);
    const down = fakeDispatch();
    const stage = cooldownPerAttempt(world.deps)(down);
    stage(world.exchange(), new RecordingHandler());
    expect(down.attempts).toHaveLength(1);
    const retrying = world.exchange();
    retrying.attempt = 1;
    const above = new RecordingHandler();
    stage(retrying, above);
    expect(above.events).toEqual(["failure retry_after"]);
    expect(down.attempts).toHaveLength(1);
  });
});
