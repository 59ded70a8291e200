import type { IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import { ExchangeAbort } from "./exchange-abort.js";
import { totalTimeout } from "./total-timeout.js";

// The idle cut is the total-timeout stage's once a response turns out to be a stream.
describe("stream idle cut", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const SSE = { "content-type": "text/event-stream" };

  // totalMs 0 (off), so the only timer is the idle cut's.
  function setup(streamIdleMs = 1_000, req?: IncomingMessage, totalMs = 0) {
    const world = stageWorld({ route: { timeouts: { totalMs, streamIdleMs } } });
    const down = fakeDispatch();
    const exchange = world.exchange({ req });
    // A request body still uploading is the client's stream, as the proxy handler passes it.
    if (req !== undefined) exchange.body = req;
    const above = new RecordingHandler(exchange);
    totalTimeout(world.deps)(down)(exchange, above);
    const attempt = down.attempts[0]!.start();
    return { attempt, above, world };
  }

  it("cuts a stream silent for streamIdleMs as a body_timeout and aborts its attempt", () => {
    const { attempt, above, world } = setup();
    attempt.handler.onResponseStart(attempt.controller, 200, SSE);
    vi.advanceTimersByTime(999);
    expect(above.events).toEqual(["start 200"]);
    vi.advanceTimersByTime(1);
    expect(above.events).toEqual(["start 200", "failure body_timeout"]);
    expect(attempt.controller.aborted).toBeInstanceOf(ExchangeAbort);
    // The aborted attempt reporting back adds nothing above.
    attempt.handler.onFailure({ kind: "aborted", error: attempt.controller.aborted });
    expect(above.events).toEqual(["start 200", "failure body_timeout"]);
    expect(world.registry.getSingleMetric("clawgate_upstream_errors_total")).toBeDefined();
  });

  it("each byte restarts the idle clock", () => {
    const { attempt, above } = setup();
    attempt.handler.onResponseStart(attempt.controller, 200, SSE);
    for (let i = 0; i < 5; i++) {
      vi.advanceTimersByTime(900);
      attempt.handler.onResponseData(attempt.controller, Buffer.from(`${i}`));
    }
    attempt.handler.onResponseEnd(attempt.controller);
    expect(above.events).toEqual([
      "start 200",
      "data 0",
      "data 1",
      "data 2",
      "data 3",
      "data 4",
      "end",
    ]);
    // The ended stream left the sweep: its timer lapses without a cut.
    vi.advanceTimersByTime(1_000);
    expect(above.events.at(-1)).toBe("end");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("streams that come and go one at a time share one timer, not one each", () => {
    const armed = vi.spyOn(globalThis, "setTimeout");
    const world = stageWorld({ route: { timeouts: { totalMs: 0, streamIdleMs: 1_000 } } });
    const down = fakeDispatch();
    const stage = totalTimeout(world.deps)(down);
    // An SSE answer that arrives whole: its stream starts and ends in one tick.
    for (let i = 0; i < 100; i++) {
      const exchange = world.exchange();
      const above = new RecordingHandler(exchange);
      stage(exchange, above);
      const attempt = down.attempts[i]!.start();
      attempt.handler.onResponseStart(attempt.controller, 200, SSE);
      attempt.handler.onResponseData(attempt.controller, Buffer.from("data: 1"));
      attempt.handler.onResponseEnd(attempt.controller);
      expect(above.events).toEqual(["start 200", "data data: 1", "end"]);
      vi.advanceTimersByTime(5);
    }
    // A timer per stream was an insert and an unenroll each time.
    expect(armed.mock.calls.length).toBeLessThanOrEqual(2);
    armed.mockRestore();
  });

  it("bytes from the client restart the idle clock too, while the upstream is silent", () => {
    const upload = new PassThrough() as unknown as IncomingMessage & PassThrough;
    const { attempt, above } = setup(1_000, upload);
    attempt.handler.onResponseStart(attempt.controller, 200, SSE);
    for (let i = 0; i < 5; i++) {
      vi.advanceTimersByTime(900);
      upload.write(`up ${i}`);
    }
    expect(above.events).toEqual(["start 200"]);
    expect(attempt.controller.aborted).toBeUndefined();
    // Once both sides fall silent the stream is cut as before.
    vi.advanceTimersByTime(1_000);
    expect(above.events).toEqual(["start 200", "failure body_timeout"]);
    // The cut stops listening to the client's body.
    expect(upload.listenerCount("data")).toBe(0);
  });

  it("leaves a response with a declared length alone, and holds no timer for it", () => {
    const { attempt, above } = setup();
    attempt.handler.onResponseStart(attempt.controller, 200, { "content-length": "2" });
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(10_000);
    expect(above.events).toEqual(["start 200"]);
  });

  it("streamIdleMs 0 turns the cut off", () => {
    const { attempt, above } = setup(0);
    attempt.handler.onResponseStart(attempt.controller, 200, SSE);
    vi.advanceTimersByTime(100_000);
    expect(above.events).toEqual(["start 200"]);
  });

  it("leaves the sweep when the stream fails", () => {
    const { attempt, above } = setup();
    attempt.handler.onResponseStart(attempt.controller, 200, SSE);
    attempt.fail("stream_broken");
    vi.advanceTimersByTime(1_000);
    expect(vi.getTimerCount()).toBe(0);
    expect(above.events).toEqual(["start 200", "failure stream_broken"]);
  });

  it("takes over from totalMs when the headers say stream, and only then", () => {
    const { attempt, above } = setup(1_000, undefined, 5_000);
    vi.advanceTimersByTime(4_000);
    attempt.handler.onResponseStart(attempt.controller, 200, SSE);
    // totalMs has passed since the request started: the stream is not cut for it.
    vi.advanceTimersByTime(999);
    attempt.handler.onResponseData(attempt.controller, Buffer.from("a"));
    vi.advanceTimersByTime(999);
    expect(above.events).toEqual(["start 200", "data a"]);
    vi.advanceTimersByTime(1);
    expect(above.events).toEqual(["start 200", "data a", "failure body_timeout"]);
    expect(vi.getTimerCount()).toBe(0);
  });
});
