import { describe, expect, it } from "vitest";
import { FakeClock, systemClock } from "./clock.js";

describe("FakeClock", () => {
  it("starts where told and moves only on advance", () => {
    const clock = new FakeClock(1_000);
    expect(clock.now()).toBe(1_000);
    expect(clock.now()).toBe(1_000);
    clock.advance(250);
    expect(clock.now()).toBe(1_250);
    clock.advance(0);
    expect(clock.now()).toBe(1_250);
  });

  it("defaults to 0 and refuses to go back", () => {
    const clock = new FakeClock();
    expect(clock.now()).toBe(0);
    expect(() => clock.advance(-1)).toThrow(RangeError);
    expect(() => clock.advance(Number.NaN)).toThrow(RangeError);
    expect(clock.now()).toBe(0);
  });
});

describe("systemClock", () => {
  it("reads epoch milliseconds, not time since start, and never decreases", () => {
    const a = systemClock.now();
    const b = systemClock.now();
    expect(b).toBeGreaterThanOrEqual(a);
    // An HTTP-date Retry-After is read against it: it must be on the epoch's scale. (Compared
    // with a fixed date, not with Date.now(), so no two clocks are raced.)
    expect(a).toBeGreaterThan(Date.parse("2025-01-01T00:00:00Z"));
  });
});
