import { describe, expect, it } from "vitest";
import { Backoff } from "./backoff.js";

describe("Backoff", () => {
  it("doubles the window from base up to max", () => {
    // random just below 1 shows each window's ceiling.
    const backoff = new Backoff({ baseMs: 250, maxMs: 10_000, random: () => 0.999_999 });
    const delays = Array.from({ length: 8 }, () => backoff.next());
    expect(delays).toEqual([249, 499, 999, 1999, 3999, 7999, 9999, 9999]);
  });

  it("draws each delay uniformly inside the window (full jitter)", () => {
    const draws = [0, 0.5, 0.25, 0.1];
    const backoff = new Backoff({ baseMs: 100, maxMs: 10_000, random: () => draws.shift()! });
    // windows 100, 200, 400, 800
    expect([backoff.next(), backoff.next(), backoff.next(), backoff.next()]).toEqual([
      0, 100, 100, 80,
    ]);
  });

  it("starts over from the base window after reset", () => {
    const backoff = new Backoff({ baseMs: 100, maxMs: 1_000, random: () => 0.999_999 });
    backoff.next();
    backoff.next();
    backoff.next();
    backoff.reset();
    expect(backoff.next()).toBe(99);
  });

  it("defaults to 250 ms base and 10 s max", () => {
    const backoff = new Backoff();
    expect([backoff.baseMs, backoff.maxMs]).toEqual([250, 10_000]);
  });

  it("rejects a base above the max", () => {
    expect(() => new Backoff({ baseMs: 500, maxMs: 100 })).toThrow(RangeError);
  });
});
