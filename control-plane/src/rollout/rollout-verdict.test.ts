import { describe, expect, it } from "vitest";
import { type Counts, judge, type Refusal } from "./rollout-verdict.js";

const spec = { maxErrorRatio: 0.05, minRequests: 20 };
const none: Refusal[] = [];

describe("judge", () => {
  it.each<[string, Counts, Counts, Refusal[], "failing" | "passing" | "inconclusive"]>([
    [
      "too few canary requests to judge, even all failing",
      { requests: 19, failures: 19 },
      { requests: 0, failures: 0 },
      none,
      "inconclusive",
    ],
    [
      "no canary request at all",
      { requests: 0, failures: 0 },
      { requests: 500, failures: 0 },
      none,
      "inconclusive",
    ],
    [
      "canaries as healthy as the rest",
      { requests: 100, failures: 1 },
      { requests: 100, failures: 0 },
      none,
      "passing",
    ],
    [
      "within maxErrorRatio of the rest",
      { requests: 100, failures: 15 },
      { requests: 100, failures: 10 },
      none,
      "passing",
    ],
    [
      "the whole fleet failing alike",
      { requests: 100, failures: 90 },
      { requests: 100, failures: 88 },
      none,
      "passing",
    ],
    [
      "canaries failing, rest fine",
      { requests: 20, failures: 20 },
      { requests: 50, failures: 0 },
      none,
      "failing",
    ],
    [
      "canaries failing, rest idle",
      { requests: 40, failures: 10 },
      { requests: 0, failures: 0 },
      none,
      "failing",
    ],
    [
      "a canary refused the version, serving nothing on it",
      { requests: 0, failures: 0 },
      { requests: 50, failures: 0 },
      [{ nodeId: "dp-a", version: 9, error: "bad caFile" }],
      "failing",
    ],
    [
      "a canary refused the version while the others served it well",
      { requests: 100, failures: 0 },
      { requests: 50, failures: 0 },
      [{ nodeId: "dp-b", version: 9, error: "bad caFile" }],
      "failing",
    ],
  ])("%s", (_name, canary, rest, refusals, kind) => {
    expect(judge({ canary, rest, refusals }, spec).kind).toBe(kind);
  });

  it("says why, with both ratios and counts", () => {
    const verdict = judge(
      {
        canary: { requests: 20, failures: 20 },
        rest: { requests: 10, failures: 0 },
        refusals: none,
      },
      spec,
    );
    expect(verdict).toEqual({
      kind: "failing",
      reason:
        "canary 5xx ratio 1.00 (20 of 20) exceeds the rest of the fleet's 0.00 (0 of 10) by more than maxErrorRatio 0.05",
    });
  });

  it("names the canary that NACKed, the version and its reason", () => {
    const verdict = judge(
      {
        canary: { requests: 0, failures: 0 },
        rest: { requests: 0, failures: 0 },
        refusals: [
          { nodeId: "dp-a", version: 9, error: 'upstream "s": tls.caFile cannot read /x' },
        ],
      },
      spec,
    );
    expect(verdict).toEqual({
      kind: "failing",
      reason: 'canary NACK: dp-a refused version 9: upstream "s": tls.caFile cannot read /x',
    });
  });

  it("says how much evidence is missing", () => {
    const verdict = judge(
      { canary: { requests: 3, failures: 0 }, rest: { requests: 0, failures: 0 }, refusals: none },
      spec,
    );
    expect(verdict).toEqual({
      kind: "inconclusive",
      reason: "canaries answered 3 of the minRequests 20 requests on the version",
    });
  });
});
