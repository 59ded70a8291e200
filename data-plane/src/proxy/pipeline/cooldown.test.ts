import { describe, expect, it } from "vitest";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import { cooldownGate, cooldownPerAttempt } from "./cooldown.js";
import { nodePick } from "./node-pick.js";

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

describe("cooldown scopes", () => {
  const nodes = ["10.0.0.1:1", "10.0.0.2:1"];

  it("node: a 429 from one node takes only that node out until its Retry-After", () => {
    const world = stageWorld({ nodes, upstream: { retryAfterScope: "node" } });
    const picked = fakeDispatch();
    const pipeline = cooldownGate(world.deps)(
      cooldownPerAttempt(world.deps)(nodePick(world.deps)(picked)),
    );
    pipeline(world.exchange(), new RecordingHandler());
    const first = picked.attempts[0]!;
    const throttledNode = first.exchange.node!.address;
    first.start().respond(429, { "retry-after": "10" });

    for (let i = 0; i < 4; i++) pipeline(world.exchange(), new RecordingHandler());
    const later = picked.attempts.slice(1).map((attempt) => attempt.exchange.node!.address);
    expect(later).toHaveLength(4);
    expect(later.every((address) => address !== throttledNode)).toBe(true);

    world.clock.advance(10_000);
    for (let i = 0; i < 2; i++) pipeline(world.exchange(), new RecordingHandler());
    const after = picked.attempts.slice(5).map((attempt) => attempt.exchange.node!.address);
    expect(after).toContain(throttledNode);
  });

  it("node: once every node cools down, the gate answers with the soonest one's wait", () => {
    const world = stageWorld({ nodes, upstream: { retryAfterScope: "node" } });
    const cooldowns = world.deps.healing.upstream("u")!.nodeCooldowns;
    cooldowns.blockFor(nodes[0]!, 8_000);
    cooldowns.blockFor(nodes[1]!, 3_000);
    const down = fakeDispatch();
    const blocked = new RecordingHandler();
    cooldownGate(world.deps)(down)(world.exchange(), blocked);
    expect(blocked.events).toEqual(["failure retry_after"]);
    expect(blocked.failures[0]!.retryAfterMs).toBe(3_000);
  });

  it("tenant: one tenant's 429 holds that tenant back, not another, nor requests without one", () => {
    const world = stageWorld({ upstream: { retryAfterScope: "tenant" } });
    const asTenant = (name: string | undefined) => {
      const exchange = world.exchange();
      exchange.tenant = name === undefined ? undefined : { name, source: {} as never };
      return exchange;
    };
    const down = fakeDispatch();
    cooldownPerAttempt(world.deps)(down)(asTenant("alpha"), new RecordingHandler());
    down.attempts[0]!.start().respond(429, { "retry-after": "30" });

    const gated = fakeDispatch();
    const gate = cooldownGate(world.deps)(gated);
    const alpha = new RecordingHandler();
    gate(asTenant("alpha"), alpha);
    expect(alpha.events).toEqual(["failure retry_after"]);
    gate(asTenant("beta"), new RecordingHandler());
    gate(asTenant(undefined), new RecordingHandler());
    expect(gated.attempts).toHaveLength(2);
    expect(world.deps.healing.upstream("u")!.cooldown.check().ok).toBe(true);
  });
});
