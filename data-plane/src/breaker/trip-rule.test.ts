import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import type { BreakerFailure } from "./breaker-outcome.js";
import { DEFAULT_BREAKER_SETTINGS } from "./breaker-policy.js";
import { ConsecutiveFailuresRule } from "./consecutive-failures.js";
import { AnyTripRule, defaultTripRule, type TripReason, type TripRule } from "./trip-rule.js";

class Recording implements TripRule {
  calls: string[] = [];
  constructor(
    readonly reason: TripReason,
    private readonly tripsOn: number,
  ) {}
  success(): void {
    this.calls.push("success");
  }
  failure(kind: BreakerFailure): boolean {
    this.calls.push(kind);
    return this.calls.length >= this.tripsOn;
  }
}

describe("ConsecutiveFailuresRule", () => {
  const rows: [sequence: (BreakerFailure | "success")[], trips: boolean[]][] = [
    [
      ["transport", "transport", "transport"],
      [false, false, true],
    ],
    [
      ["transport", "transport", "success", "transport", "transport"],
      [false, false, false, false],
    ],
    [
      ["transport", "status_5xx", "stream_broken", "transport", "transport"],
      [false, false, false, false, true],
    ],
  ];
  for (const [sequence, trips] of rows) {
    it(sequence.join(", "), () => {
      const rule = new ConsecutiveFailuresRule(3);
      const got: boolean[] = [];
      for (const step of sequence) {
        if (step === "success") rule.success();
        else got.push(rule.failure(step));
      }
      expect(got).toEqual(trips);
    });
  }
});

describe("AnyTripRule", () => {
  it("tells every rule every event and names the rule that tripped", () => {
    const a = new Recording("consecutive_failures", 3);
    const b = new Recording("failure_ratio", 2);
    const any = new AnyTripRule([a, b]);
    any.success();
    expect(any.failure("transport")).toBe(true);
    expect(any.reason).toBe("failure_ratio");
    expect(a.calls).toEqual(["success", "transport"]);
    expect(b.calls).toEqual(["success", "transport"]);
  });

  it("prefers the first rule when several trip at once", () => {
    const any = new AnyTripRule([
      new Recording("consecutive_failures", 1),
      new Recording("failure_ratio", 1),
    ]);
    expect(any.failure("transport")).toBe(true);
    expect(any.reason).toBe("consecutive_failures");
  });
});

describe("defaultTripRule", () => {
  it("combines the consecutive rule and the window", () => {
    const clock = new FakeClock();
    const byChain = defaultTripRule(DEFAULT_BREAKER_SETTINGS, clock);
    const chain = Array.from({ length: 5 }, () => byChain.failure("transport"));
    expect(chain).toEqual([false, false, false, false, true]);
    expect(byChain.reason).toBe("consecutive_failures");

    const byRatio = defaultTripRule(DEFAULT_BREAKER_SETTINGS, clock);
    const ratio = Array.from({ length: 20 }, () => byRatio.failure("status_5xx"));
    expect(ratio.indexOf(true)).toBe(19);
    expect(byRatio.reason).toBe("failure_ratio");
  });
});
