import { describe, expect, it } from "vitest";
import { judge } from "./rollout-verdict.js";

const spec = { maxErrorRatio: 0.05, minRequests: 20 };

describe("judge", () => {
  it.each([
    [
      "too few canary requests to judge",
      { requests: 19, failures: 19 },
      { requests: 0, failures: 0 },
      false,
    ],
    [
      "canaries as healthy as the rest",
      { requests: 100, failures: 1 },
      { requests: 100, failures: 0 },
      false,
    ],
    [
      "within maxErrorRatio of the rest",
      { requests: 100, failures: 15 },
      { requests: 100, failures: 10 },
      false,
    ],
    [
      "the whole fleet failing alike",
      { requests: 100, failures: 90 },
      { requests: 100, failures: 88 },
      false,
    ],
    [
      "canaries failing, rest fine",
      { requests: 20, failures: 20 },
      { requests: 50, failures: 0 },
      true,
    ],
    [
      "canaries failing, rest idle",
      { requests: 40, failures: 10 },
      { requests: 0, failures: 0 },
      true,
    ],
  ])("%s", (_name, canary, rest, failing) => {
    expect(judge(canary, rest, spec).failing).toBe(failing);
  });

  it("says why, with both ratios and counts", () => {
    const verdict = judge({ requests: 20, failures: 20 }, { requests: 10, failures: 0 }, spec);
    expect(verdict).toEqual({
      failing: true,
      reason:
        "canary 5xx ratio 1.00 (20 of 20) exceeds the rest of the fleet's 0.00 (0 of 10) by more than maxErrorRatio 0.05",
    });
  });
});
