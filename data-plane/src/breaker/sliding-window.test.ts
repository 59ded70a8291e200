import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { SlidingWindowRule } from "./sliding-window.js";

const settings = { windowMs: 30_000, minRequests: 20, failureRatio: 0.6 };

describe("SlidingWindowRule", () => {
  it("keeps an event counted for at least 27 s and drops it by 30 s (3 s buckets)", () => {
    const clock = new FakeClock(0);
    const rule = new SlidingWindowRule(settings, clock);
    clock.advance(2_999); // late in the first bucket
    rule.failure("status_5xx");
    const steps: [atMs: number, total: number][] = [
      [2_999, 1],
      [26_999, 1],
      [29_999, 1],
      [30_000, 0],
    ];
    for (const [at, total] of steps) {
      clock.advance(at - clock.now());
      expect(rule.counts()).toEqual({ total, failed: total });
    }
  });

  it("slides bucket by bucket", () => {
    const clock = new FakeClock(0);
    const rule = new SlidingWindowRule(settings, clock);
    for (let second = 0; second < 30; second++) {
      rule.success();
      if (second % 3 === 0) rule.failure("transport");
      clock.advance(1_000);
    }
    // At 30 s the first bucket (0-3 s: 3 successes, 1 failure) has left.
    expect(rule.counts()).toEqual({ total: 36, failed: 9 });
    clock.advance(3_000);
    expect(rule.counts()).toEqual({ total: 32, failed: 8 });
  });

  it("clears everything after a long silence without walking every missed bucket", () => {
    const clock = new FakeClock(0);
    const rule = new SlidingWindowRule(settings, clock);
    for (let i = 0; i < 19; i++) rule.failure("status_5xx");
    clock.advance(365 * 24 * 3_600_000);
    expect(rule.counts()).toEqual({ total: 0, failed: 0 });
    // The window starts over: 19 fresh failures are still below minRequests.
    let tripped = false;
    for (let i = 0; i < 19; i++) tripped ||= rule.failure("status_5xx");
    expect(tripped).toBe(false);
    expect(rule.failure("status_5xx")).toBe(true);
  });

  it("trips only above the ratio once minRequests were seen", () => {
    const clock = new FakeClock(0);
    const rule = new SlidingWindowRule(
      { windowMs: 10_000, minRequests: 10, failureRatio: 0.5 },
      clock,
    );
    for (let i = 0; i < 5; i++) rule.success();
    const results = Array.from({ length: 6 }, () => rule.failure("transport"));
    // 5/10 is not over 0.5; 6/11 is.
    expect(results).toEqual([false, false, false, false, false, true]);
  });
});
