import { BreakerPhase } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { BreakerStates } from "./breaker-states.js";
import { toWorkerBreakers, type WorkerBreaker, WorkerBreakers } from "./worker-breakers.js";

const all = () => true;
const open = (upstream: string, sinceMs: number, cooldownUntilMs: number): WorkerBreaker => ({
  upstream,
  phase: BreakerPhase.OPEN,
  sinceMs,
  cooldownUntilMs,
});
const halfOpen = (upstream: string, sinceMs: number): WorkerBreaker => ({
  upstream,
  phase: BreakerPhase.HALF_OPEN,
  sinceMs,
  cooldownUntilMs: 0,
});
const names = (merged: WorkerBreakers) =>
  merged
    .report(all)
    .map((b) => [b.upstream, b.phase, Number(b.sinceMs), Number(b.cooldownUntilMs)]);

describe("WorkerBreakers: the workers' breakers merged into one BreakerReport", () => {
  it.each([
    {
      name: "an upstream open in one worker only is reported open",
      workers: [[open("a", 1_000, 31_000)], []],
      want: [["a", BreakerPhase.OPEN, 1_000, 31_000]],
    },
    {
      name: "open in one worker and half-open in another: open, the worse",
      workers: [[halfOpen("a", 5_000)], [open("a", 2_000, 32_000)]],
      want: [["a", BreakerPhase.OPEN, 2_000, 32_000]],
    },
    {
      name: "open in two workers: the one that refuses longer",
      workers: [[open("a", 1_000, 31_000)], [open("a", 3_000, 63_000)]],
      want: [["a", BreakerPhase.OPEN, 3_000, 63_000]],
    },
    {
      name: "half-open in two workers: the one half-open longer",
      workers: [[halfOpen("a", 7_000)], [halfOpen("a", 4_000)]],
      want: [["a", BreakerPhase.HALF_OPEN, 4_000, 0]],
    },
    {
      name: "each upstream on its own, sorted",
      workers: [[open("b", 1, 2)], [halfOpen("a", 3)]],
      want: [
        ["a", BreakerPhase.HALF_OPEN, 3, 0],
        ["b", BreakerPhase.OPEN, 1, 2],
      ],
    },
  ])("$name", ({ workers, want }) => {
    const merged = new WorkerBreakers();
    for (const [i, breakers] of workers.entries()) merged.reported(i + 1, breakers);
    expect(names(merged)).toEqual(want);
  });

  it("forgets what a worker closed, and the breakers of a worker that exited", () => {
    const merged = new WorkerBreakers();
    merged.reported(1, [open("a", 1_000, 31_000)]);
    merged.reported(2, [halfOpen("b", 2_000)]);
    merged.reported(1, []);
    expect(names(merged)).toEqual([["b", BreakerPhase.HALF_OPEN, 2_000, 0]]);
    merged.gone(2);
    expect(merged.report(all)).toEqual([]);
  });

  it("leaves out an upstream the config no longer has", () => {
    const merged = new WorkerBreakers();
    merged.reported(1, [open("gone", 1, 2), open("kept", 1, 2)]);
    expect(merged.report((upstream) => upstream === "kept").map((b) => b.upstream)).toEqual([
      "kept",
    ]);
  });

  it("carries a worker's BreakerStates through the JSON channel unchanged", () => {
    const states = new BreakerStates();
    states.transition({
      upstream: "a",
      from: "half-open",
      to: "open",
      reason: "probe_failed",
      at: 1_500,
      until: 31_500,
    });
    const sent = JSON.parse(JSON.stringify(toWorkerBreakers(states.report(all))));
    const merged = new WorkerBreakers();
    merged.reported(1, sent);
    expect(merged.report(all)).toEqual(states.report(all));
  });
});
