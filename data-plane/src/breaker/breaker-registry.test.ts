import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { BreakerRegistry, type BreakerStateSink } from "./breaker-registry.js";
import type { BreakerPermit, BreakerStateName, BreakerTransition } from "./circuit-breaker.js";

function recordingSink() {
  const calls: string[] = [];
  const sink: BreakerStateSink = {
    track: (upstream: string, state: BreakerStateName) => calls.push(`track ${upstream} ${state}`),
    transition: (e: BreakerTransition) => calls.push(`transition ${e.upstream} ${e.from}->${e.to}`),
    forget: (upstream: string) => calls.push(`forget ${upstream}`),
  };
  return { calls, sink };
}

function fail(
  breaker: { acquire(): unknown; record(p: BreakerPermit, o: "transport"): void },
  n: number,
) {
  for (let i = 0; i < n; i++) breaker.record(breaker.acquire() as BreakerPermit, "transport");
}

describe("BreakerRegistry", () => {
  it("creates one breaker per upstream and returns it again", () => {
    const registry = new BreakerRegistry({ clock: new FakeClock() });
    const a = registry.get("a", {});
    expect(registry.get("a", {})).toBe(a);
    expect(registry.get("b", {})).not.toBe(a);
    expect(registry.size).toBe(2);
    expect(registry.find("a")).toBe(a);
    expect(registry.find("c")).toBeUndefined();
    expect([...registry.entries()].map(([name]) => name)).toEqual(["a", "b"]);
  });

  it("survives a snapshot swap: a new policy keeps the open state", () => {
    const clock = new FakeClock();
    const registry = new BreakerRegistry({ clock, random: () => 0 });
    const breaker = registry.get("a", { consecutiveFailures: 2 });
    fail(breaker, 2);
    expect(breaker.state).toBe("open");
    clock.advance(5_000);
    expect(registry.get("a", { consecutiveFailures: 3, cooldownMs: 1_000 })).toBe(breaker);
    expect(breaker.state).toBe("open");
    expect(breaker.policy.consecutiveFailures).toBe(3);
    expect(breaker.acquire()).toEqual({ ok: false, reason: "breaker_open", retryAfterMs: 25_000 });
  });

  it("retain drops breakers of upstreams gone from the snapshot, and their metrics", () => {
    const { calls, sink } = recordingSink();
    const registry = new BreakerRegistry({ clock: new FakeClock(), metrics: sink });
    const a = registry.get("a", { consecutiveFailures: 1 });
    registry.get("b", {});
    fail(a, 1);
    registry.retain(["b", "c"]);
    expect(registry.find("a")).toBeUndefined();
    expect(registry.find("b")).toBeDefined();
    expect(registry.size).toBe(1);
    expect(calls).toEqual([
      "track a closed",
      "track b closed",
      "transition a closed->open",
      "forget a",
    ]);
    // An upstream that comes back starts from a fresh, closed breaker.
    expect(registry.get("a", {}).state).toBe("closed");
  });

  it("sends every transition to the metrics and then the listener", () => {
    const order: string[] = [];
    const events: BreakerTransition[] = [];
    const clock = new FakeClock(500);
    const registry = new BreakerRegistry({
      clock,
      random: () => 0,
      metrics: {
        track: () => {},
        transition: () => order.push("metrics"),
        forget: () => {},
      },
      onTransition: (e) => {
        order.push("listener");
        events.push(e);
      },
    });
    fail(registry.get("x", { consecutiveFailures: 1, cooldownMs: 1_000 }), 1);
    expect(events).toEqual([
      {
        upstream: "x",
        from: "closed",
        to: "open",
        reason: "consecutive_failures",
        at: 500,
        until: 1_500,
      },
    ]);
    expect(order).toEqual(["metrics", "listener"]);
  });

  it("passes jitter settings to its breakers", () => {
    const clock = new FakeClock(0);
    const registry = new BreakerRegistry({ clock, random: () => 0.5, jitterRatio: 0.2 });
    const breaker = registry.get("x", { consecutiveFailures: 1, cooldownMs: 10_000 });
    fail(breaker, 1);
    expect(breaker.acquire()).toEqual({ ok: false, reason: "breaker_open", retryAfterMs: 11_000 });
  });
});
