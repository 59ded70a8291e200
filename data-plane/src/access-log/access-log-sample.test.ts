import { describe, expect, it } from "vitest";
import { accessLogSampler } from "./access-log-sample.js";

describe("accessLogSampler", () => {
  it("keeps every line at the default rate 1", () => {
    const keeps = accessLogSampler(1, () => 0.999);
    expect([keeps(200, false), keeps(404, false), keeps(503, true)]).toEqual([true, true, true]);
  });

  it("at rate 0 keeps errors (5xx or a failure kind) and drops every success", () => {
    const keeps = accessLogSampler(0, () => 0);
    expect(keeps(200, false)).toBe(false);
    expect(keeps(404, false)).toBe(false);
    expect(keeps(500, false)).toBe(true);
    expect(keeps(502, true)).toBe(true);
    // A stream cut after its 200 went out still carries its failure kind.
    expect(keeps(200, true)).toBe(true);
  });

  it("keeps a success when the draw falls under the rate", () => {
    const draws = [0.1, 0.5, 0.24, 0.25];
    const keeps = accessLogSampler(0.25, () => draws.shift()!);
    expect([keeps(200, false), keeps(200, false), keeps(200, false), keeps(200, false)]).toEqual([
      true,
      false,
      true,
      false,
    ]);
  });

  it("refuses a rate outside 0..1, naming the setting", () => {
    expect(() => accessLogSampler(1.5)).toThrow("accessLogSample must be 0..1, got 1.5");
    expect(() => accessLogSampler(Number.NaN)).toThrow("accessLogSample");
  });
});
