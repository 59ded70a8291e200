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
  it("reads epoch milliseconds close to Date.now and never decreases", () => {
    const a = systemClock.now();
    const b = systemClock.now();
    expect(b).toBeGreaterThanOrEqual(a);
    expect(Math.abs(a - Date.now())).toBeLessThan(5_000);
  });
});
