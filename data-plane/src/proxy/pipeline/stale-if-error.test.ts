import { describe, expect, it } from "vitest";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import type { Exchange } from "./exchange.js";
import { staleIfError } from "./stale-if-error.js";

describe("stale-if-error stage", () => {
  const route = { fallback: { staleIfErrorSeconds: 60 } };

  function fetchThrough(world: ReturnType<typeof stageWorld>, tenant?: string) {
    const down = fakeDispatch();
    const exchange = world.exchange({ staleKey: "r GET /" });
    if (tenant !== undefined) exchange.tenant = { name: tenant } as Exchange["tenant"];
    const above = new RecordingHandler(exchange);
    staleIfError(world.deps.healing.staleCache)(down)(exchange, above);
    return { attempt: down.attempts[0]!.start(), above };
  }

  it("answers a failed request with the last 2xx copy", () => {
    const world = stageWorld({ route });
    fetchThrough(world).attempt.respond(200, {}, "fresh");
    const { attempt, above } = fetchThrough(world);
    attempt.fail("refused");
    expect(above.events).toEqual(["stale 200 fresh"]);
  });

  it("serves the copy instead of a 5xx and aborts that attempt", () => {
    const world = stageWorld({ route });
    fetchThrough(world).attempt.respond(200, {}, "fresh");
    const { attempt, above } = fetchThrough(world);
    attempt.respond(502, {}, "bad gateway");
    expect(above.events).toEqual(["stale 200 fresh"]);
    expect(attempt.controller.aborted).toBeDefined();
  });

  it("passes the failure up when no copy is fresh enough", () => {
    const world = stageWorld({ route });
    fetchThrough(world).attempt.respond(200, {}, "fresh");
    world.clock.advance(61_000);
    const { attempt, above } = fetchThrough(world);
    attempt.fail("refused");
    expect(above.events).toEqual(["failure refused"]);
  });

  it("keeps no copy of a response that must not be stored", () => {
    const world = stageWorld({ route });
    fetchThrough(world).attempt.respond(200, { "cache-control": "no-store" }, "secret");
    const { attempt, above } = fetchThrough(world);
    attempt.fail("refused");
    expect(above.events).toEqual(["failure refused"]);
  });

  it("neither keeps nor serves a copy for a request the auth policy found a tenant for", () => {
    const world = stageWorld({ route });
    fetchThrough(world, "alice").attempt.respond(200, {}, "alice's");
    const anonymous = fetchThrough(world);
    anonymous.attempt.fail("refused");
    expect(anonymous.above.events).toEqual(["failure refused"]);

    fetchThrough(world).attempt.respond(200, {}, "public");
    const bob = fetchThrough(world, "bob");
    bob.attempt.fail("refused");
    expect(bob.above.events).toEqual(["failure refused"]);
  });
});
