import { describe, expect, it } from "vitest";
import { backoffMs } from "./backoff.js";

describe("backoffMs", () => {
  it("grows the ceiling from 25 ms by doubling up to 250 ms", () => {
    const almostOne = () => 0.999_999;
    const ceilings = [1, 2, 3, 4, 5, 6, 50].map((attempt) => backoffMs(attempt, almostOne));
    expect(ceilings).toEqual([24, 49, 99, 199, 249, 249, 249]);
  });

  it("is uniform from 0 (full jitter)", () => {
    expect(backoffMs(3, () => 0)).toBe(0);
    expect(backoffMs(3, () => 0.5)).toBe(50);
    expect(backoffMs(10, () => 0.5)).toBe(125);
  });

  it("treats nonsense attempts as the first", () => {
    expect(backoffMs(0, () => 0.999)).toBe(24);
    expect(backoffMs(-3, () => 0.999)).toBe(24);
  });

  it("defaults to Math.random and stays in range", () => {
    for (let i = 0; i < 200; i++) {
      const ms = backoffMs(4);
      expect(ms).toBeGreaterThanOrEqual(0);
      expect(ms).toBeLessThan(200);
    }
  });
});
