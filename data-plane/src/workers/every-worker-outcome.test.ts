import { describe, expect, it } from "vitest";
import type { SnapshotApplyResult } from "../snapshot-client/snapshot-client.js";
import { everyWorkerOutcome, type NackCount } from "./every-worker-outcome.js";

/** A NackCount as main.ts keeps it, and the counter it feeds. */
function counted() {
  let nacks = 0;
  const count: NackCount = { count: () => nacks, nacked: () => nacks++ };
  return { count, nacks: () => nacks };
}

describe("everyWorkerOutcome", () => {
  it("passes a superseded apply through as undefined, neither NACKed nor counted", async () => {
    const { count, nacks } = counted();
    expect(await everyWorkerOutcome(Promise.resolve(undefined), count)).toBeUndefined();
    expect(nacks()).toBe(0);
  });

  it("counts a worker's refusal once and NACKs it with its reason", async () => {
    const { count, nacks } = counted();
    const refused: SnapshotApplyResult = { ok: false, reason: "worker 2: bad route" };
    expect(await everyWorkerOutcome(Promise.resolve(refused), count)).toEqual(refused);
    expect(nacks()).toBe(1);
  });

  it("does not count again a refusal the primary counted as it refused", async () => {
    const { count, nacks } = counted();
    const refusedHere = (async (): Promise<SnapshotApplyResult> => {
      // The primary refuses after the workers prepared, so after the apply began.
      await Promise.resolve();
      count.nacked();
      return { ok: false, reason: "bad" };
    })();
    expect(await everyWorkerOutcome(refusedHere, count)).toEqual({ ok: false, reason: "bad" });
    expect(nacks()).toBe(1);
  });

  it("counts nothing for an apply that succeeded", async () => {
    const { count, nacks } = counted();
    expect(await everyWorkerOutcome(Promise.resolve({ ok: true }), count)).toEqual({ ok: true });
    expect(nacks()).toBe(0);
  });
});
