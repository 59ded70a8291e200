import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import { totalTimeout } from "./total-timeout.js";

describe("total-timeout stage", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function setup() {
    const world = stageWorld({ route: { timeouts: { totalMs: 1_000 } } });
    const down = fakeDispatch();
    const exchange = world.exchange();
    const above = new RecordingHandler(exchange);
    totalTimeout(world.deps)(down)(exchange, above);
    return { down, above };
  }

  it("fails a request without headers in time as header_timeout and aborts its attempt", () => {
    const { down, above } = setup();
    const attempt = down.attempts[0]!.start();
    vi.advanceTimersByTime(1_000);
    expect(above.events).toEqual(["failure header_timeout"]);
    expect(attempt.controller.aborted).toBeDefined();
    // What the aborted attempt reports afterwards changes nothing.
    attempt.respond(200, {}, "late");
    expect(above.events).toEqual(["failure header_timeout"]);
  });

  it("aborts an attempt still queued in the pool as soon as it starts", () => {
    const { down } = setup();
    vi.advanceTimersByTime(1_000);
    const attempt = down.attempts[0]!.start();
    expect(attempt.controller.aborted).toBeDefined();
  });

  it("a body that stalls past the total time is a body_timeout", () => {
    const { down, above } = setup();
    const attempt = down.attempts[0]!.start();
    attempt.handler.onResponseStart(attempt.controller, 200, {});
    vi.advanceTimersByTime(1_000);
    expect(above.events).toEqual(["start 200", "failure body_timeout"]);
  });

  it("forgets a request once its response ended: the shared timer lapses, firing nothing", () => {
    const { down, above } = setup();
    down.attempts[0]!.start().respond(200, {}, "ok");
    vi.advanceTimersByTime(1_000);
    expect(above.events).toEqual(["start 200", "data ok", "end"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("many requests in flight share one timer, and each still times out", () => {
    const world = stageWorld({ route: { timeouts: { totalMs: 1_000 } } });
    const down = fakeDispatch();
    const stage = totalTimeout(world.deps)(down);
    const above = Array.from({ length: 50 }, () => {
      const exchange = world.exchange();
      const handler = new RecordingHandler(exchange);
      stage(exchange, handler);
      return handler;
    });
    for (const attempt of down.attempts) attempt.start();
    // A timer per request was an allocation, a list insert and a clear on every request.
    expect(vi.getTimerCount()).toBe(1);
    down.attempts[0]!.respond(200, {}, "ok");
    vi.advanceTimersByTime(1_000);
    expect(above[0]!.events).toEqual(["start 200", "data ok", "end"]);
    for (const handler of above.slice(1))
      expect(handler.events).toEqual(["failure header_timeout"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("bounds a stream only until its headers: an SSE stream outlives totalMs", () => {
    const { down, above } = setup();
    const attempt = down.attempts[0]!.start();
    attempt.handler.onResponseStart(attempt.controller, 200, {
      "content-type": "text/event-stream",
    });
    vi.advanceTimersByTime(5_000);
    attempt.handler.onResponseData(attempt.controller, Buffer.from("data: late"));
    attempt.handler.onResponseEnd(attempt.controller);
    expect(above.events).toEqual(["start 200", "data data: late", "end"]);
    expect(attempt.controller.aborted).toBeUndefined();
  });

  it("a chunked body of no declared length is a stream too", () => {
    const { down, above } = setup();
    const attempt = down.attempts[0]!.start();
    attempt.handler.onResponseStart(attempt.controller, 200, { "transfer-encoding": "chunked" });
    vi.advanceTimersByTime(5_000);
    expect(above.events).toEqual(["start 200"]);
  });
});
