import { describe, expect, it } from "vitest";
import { subShare } from "./sub-share-split.js";

describe("subShare", () => {
  it.each([
    // available, workers, lent
    [10, 2, 5],
    [5, 2, 3],
    [2, 2, 1],
    [1, 2, 1],
    [1, 8, 1],
    [7, 3, 3],
    [100, 1, 100],
    [9, 0, 9],
    [0, 2, 0],
    [-3, 2, 0],
  ])("lends %i held among %i workers as %i", (available, workers, lent) => {
    expect(subShare(available, workers)).toBe(lent);
  });

  it("hands the whole of a budget out to two workers asking in turn, in shrinking parts", () => {
    let held = 20;
    const lent: number[] = [];
    while (held > 0) {
      const part = subShare(held, 2);
      lent.push(part);
      held -= part;
    }
    expect(lent).toEqual([10, 5, 3, 1, 1]);
    expect(lent.reduce((a, b) => a + b, 0)).toBe(20);
  });
});
