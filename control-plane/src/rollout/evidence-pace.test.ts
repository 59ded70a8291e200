import { describe, expect, it } from "vitest";
import { EvidencePace } from "./evidence-pace.js";
import type { Verdict } from "./rollout-verdict.js";

describe("EvidencePace", () => {
  it("is due on a changed verdict, after everyMs, or when the clock stepped back", () => {
    const pace = new EvidencePace(10_000);
    const steps: Array<[now: number, verdict: Verdict["kind"], due: boolean]> = [
      [0, "inconclusive", true], // nothing written yet
      [500, "inconclusive", false],
      [9_999, "inconclusive", false],
      [10_000, "inconclusive", true], // everyMs after the last write
      [10_500, "passing", true], // the verdict changed
      [11_000, "passing", false],
      [5_000, "passing", true], // the wall clock stepped back
    ];
    for (const [now, verdict, due] of steps) {
      expect([now, verdict, pace.due(now, verdict)]).toEqual([now, verdict, due]);
      if (due) pace.wrote(now, verdict);
    }
  });

  it("writes a new rollout's first ledger at once", () => {
    const pace = new EvidencePace(10_000);
    pace.wrote(0, "passing");
    expect(pace.due(1, "passing")).toBe(false);
    pace.reset();
    expect(pace.due(1, "passing")).toBe(true);
  });
});
