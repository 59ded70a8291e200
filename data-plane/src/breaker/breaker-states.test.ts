import { BreakerPhase } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { BreakerStates } from "./breaker-states.js";
import type { BreakerTransition } from "./circuit-breaker.js";

const open = (upstream: string, at: number): BreakerTransition => ({
  upstream,
  from: "closed",
  to: "open",
  reason: "consecutive_failures",
  at,
  until: at + 30_000,
});

describe("BreakerStates", () => {
  it("reports breakers that are not closed, each with its latest transition", () => {
    const states = new BreakerStates();
    states.transition(open("a", 1_000));
    states.transition(open("b", 2_000));
    states.transition({
      upstream: "a",
      from: "open",
      to: "half-open",
      reason: "cooldown_elapsed",
      at: 31_000,
    });
    states.transition({
      upstream: "b",
      from: "open",
      to: "half-open",
      reason: "cooldown_elapsed",
      at: 32_000,
    });
    states.transition({
      upstream: "b",
      from: "half-open",
      to: "closed",
      reason: "probes_succeeded",
      at: 33_000,
    });
    expect(states.report(() => true)).toEqual([
      { upstream: "a", phase: BreakerPhase.HALF_OPEN, sinceMs: 31_000n, cooldownUntilMs: 0n },
    ]);
  });

  it("carries an open breaker's cooldown end", () => {
    const states = new BreakerStates();
    states.transition(open("a", 1_000.4));
    expect(states.report(() => true)).toEqual([
      { upstream: "a", phase: BreakerPhase.OPEN, sinceMs: 1_000n, cooldownUntilMs: 31_000n },
    ]);
  });

  it("drops the breaker of an upstream no longer in the config", () => {
    const states = new BreakerStates();
    states.transition(open("gone", 1_000));
    states.transition(open("kept", 1_000));
    expect(states.report((upstream) => upstream === "kept").map((s) => s.upstream)).toEqual([
      "kept",
    ]);
  });
});
