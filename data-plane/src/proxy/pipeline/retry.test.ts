import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import { clientGone } from "./exchange-abort.js";
import { retry } from "./retry.js";

describe("retry stage", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function setup(on = ["connect-failure", "reset", "5xx"], attempts = 2) {
    const world = stageWorld({ route: { retry: { attempts, on } } });
    const down = fakeDispatch();
    const exchange = world.exchange();
    const above = new RecordingHandler();
    retry(world.deps)(down)(exchange, above);
    return { world, down, exchange, above };
  }

  it("sends a refused attempt again on another node after a backoff; only its answer goes up", () => {
    const { down, exchange, above } = setup();
    down.attempts[0]!.start().fail("refused");
    expect(above.events).toEqual([]);
    expect(exchange.nextNode).toBeDefined();
    expect(down.attempts).toHaveLength(1);
    vi.runOnlyPendingTimers();
    expect(down.attempts).toHaveLength(2);
    down.attempts[1]!.start().respond(200, {}, "ok");
    expect(above.events).toEqual(["start 200", "data ok", "end"]);
  });

  it("drops a 5xx it retries and relays the retry's response", () => {
    const { down, above } = setup();
    down.attempts[0]!.start().respond(502, {}, "bad gateway");
    expect(above.events).toEqual([]);
    vi.runOnlyPendingTimers();
    down.attempts[1]!.start().respond(200, {}, "ok");
    expect(above.events).toEqual(["start 200", "data ok", "end"]);
  });

  it("passes the last failure up once the attempts are spent", () => {
    const { down, above } = setup(undefined, 1);
    down.attempts[0]!.start().fail("refused");
    vi.runOnlyPendingTimers();
    down.attempts[1]!.start().fail("refused");
    expect(above.events).toEqual(["failure refused"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("answers a 5xx that started a Retry-After cooldown instead of retrying it", () => {
    const { down, exchange, above } = setup();
    exchange.coolingDown = true;
    down.attempts[0]!.start().respond(503, {}, "busy");
    expect(above.events).toEqual(["start 503", "data busy", "end"]);
    expect(down.attempts).toHaveLength(1);
  });

  it("ends the backoff without another attempt when the client leaves", () => {
    const { down, above } = setup();
    down.attempts[0]!.start().fail("refused");
    above.controller!.abort(clientGone());
    expect(above.events).toEqual(["failure client_gone"]);
    vi.runOnlyPendingTimers();
    expect(down.attempts).toHaveLength(1);
  });

  it("never retries a failure the route does not list", () => {
    const { down, above } = setup(["connect-failure"]);
    down.attempts[0]!.start().fail("reset");
    expect(above.events).toEqual(["failure reset"]);
  });
});
