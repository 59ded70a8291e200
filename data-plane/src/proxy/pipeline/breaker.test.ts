import { describe, expect, it } from "vitest";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import { breakerGate, breakerPermit } from "./breaker.js";

describe("breaker stages", () => {
  // Opens on the first failure, so one request shows what the breaker learned.
  const breaker = { consecutiveFailures: 1, minRequests: 100, cooldownMs: 10_000 };

  it("records how the request ended; once open it fails requests fast with a Retry-After", () => {
    const world = stageWorld({ breaker });
    const down = fakeDispatch();
    const stage = breakerPermit(world.deps)(down);
    stage(world.exchange(), new RecordingHandler());
    down.attempts[0]!.start().fail("refused");
    const above = new RecordingHandler();
    stage(world.exchange(), above);
    expect(down.attempts).toHaveLength(1);
    expect(above.events).toEqual(["failure breaker_open"]);
    expect(above.failures[0]!.retryAfterMs).toBeGreaterThan(0);
  });

  it("counts a 5xx at its status line", () => {
    // 5xx answers count in the failure ratio of the window, not in the consecutive rule.
    const world = stageWorld({ breaker: { minRequests: 1, failureRatio: 0.5 } });
    const down = fakeDispatch();
    breakerPermit(world.deps)(down)(world.exchange(), new RecordingHandler());
    down.attempts[0]!.start().respond(500);
    expect(world.deps.healing.upstream("u")!.breaker.inspect().state).toBe("open");
  });

  it("hands the permit back unrecorded when the client left", () => {
    const world = stageWorld({ breaker });
    const down = fakeDispatch();
    breakerPermit(world.deps)(down)(world.exchange(), new RecordingHandler());
    down.attempts[0]!.start().fail("client_gone");
    expect(world.deps.healing.upstream("u")!.breaker.inspect().state).toBe("closed");
  });

  it("records the failure a planned retry was for when that retry fails fast", () => {
    const world = stageWorld({ breaker });
    const down = fakeDispatch();
    const exchange = world.exchange();
    breakerPermit(world.deps)(down)(exchange, new RecordingHandler());
    exchange.retriedAfter = "reset";
    down.attempts[0]!.start().fail("retry_after");
    expect(world.deps.healing.upstream("u")!.breaker.inspect().state).toBe("open");
  });

  it("fails a retry fast when the breaker opened meanwhile, but never a first attempt", () => {
    const world = stageWorld({ breaker });
    const opener = fakeDispatch();
    breakerPermit(world.deps)(opener)(world.exchange(), new RecordingHandler());
    opener.attempts[0]!.start().fail("refused");

    const down = fakeDispatch();
    const gate = breakerGate(world.deps)(down);
    gate(world.exchange(), new RecordingHandler());
    expect(down.attempts).toHaveLength(1);

    const retrying = world.exchange();
    retrying.attempt = 1;
    const above = new RecordingHandler();
    gate(retrying, above);
    expect(above.events).toEqual(["failure breaker_open"]);
    expect(down.attempts).toHaveLength(1);
  });

  it("judges a stream by its headers, so a half-open probe slot is not held for its life", () => {
    const world = stageWorld({
      breaker: { ...breaker, halfOpenMaxInFlight: 1, halfOpenSuccesses: 2 },
    });
    const down = fakeDispatch();
    const stage = breakerPermit(world.deps)(down);
    stage(world.exchange(), new RecordingHandler());
    down.attempts[0]!.start().fail("refused");
    world.clock.advance(11_000); // the cooldown plus its jitter (up to 10 %)
    // The half-open probe is an SSE stream that stays open.
    const probe = down.attempts.length;
    stage(world.exchange(), new RecordingHandler());
    const stream = down.attempts[probe]!.start();
    stream.handler.onResponseStart(stream.controller, 200, { "content-type": "text/event-stream" });
    const next = new RecordingHandler();
    stage(world.exchange(), next);
    expect(next.events).toEqual([]);
    expect(down.attempts).toHaveLength(probe + 2);
  });
});
