import { describe, expect, it } from "vitest";
import { sameRoundRatio } from "./same-round-ratio.js";

describe("sameRoundRatio", () => {
  it.each([
    { own: [4, 4, 4], base: [2, 10, 4], expected: 1, why: "the middle of 2, 0.4 and 1" },
    {
      own: [3, 5],
      base: [1, 1],
      expected: 4,
      why: "an even count takes the mean of the middle two",
    },
    { own: [6], base: [3], expected: 2, why: "one round is its own ratio" },
    {
      own: [4, undefined, 9],
      base: [2, 5, 0],
      expected: 2,
      why: "a round missing a figure, or with a base of 0, is left out",
    },
  ])("$why", ({ own, base, expected }) => {
    expect(sameRoundRatio(own, base)).toBeCloseTo(expected, 10);
  });

  it("has no ratio when no round has both figures", () => {
    expect(sameRoundRatio([undefined], [1])).toBeUndefined();
    expect(sameRoundRatio([], [])).toBeUndefined();
  });
});
