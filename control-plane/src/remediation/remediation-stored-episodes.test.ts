import { describe, expect, it } from "vitest";
import type { ActionResult } from "./action-result.js";
import { episodeKey } from "./journaled-attempts.js";
import { harness, manualElection, memoryEpisodeRecords, NODE, reports } from "./runner-harness.js";

const KEY = episodeKey("agents", NODE);

/** A hook the test finishes by hand, as a slow restart command would. */
function heldHook() {
  let finish: ((result: ActionResult) => void) | undefined;
  return {
    runCommand: () =>
      new Promise<ActionResult>((resolve) => {
        finish = resolve;
      }),
    finish: (outcome: ActionResult["outcome"]) => finish?.({ outcome, evidence: outcome }),
  };
}

// Review 20 late, Medium 1: the attempt stored its record after the hook finished without
// looking whether the episode was still current and this replica still led, so a readmission or
// a new leader during the hook found its deleted (or newer) key written back.
describe("the stored episode of an attempt whose hook outlives it", () => {
  it("is not written back when the node was readmitted while the hook ran", async () => {
    const episodes = memoryEpisodeRecords();
    const hook = heldHook();
    const h = harness({ runCommand: hook.runCommand, runner: { episodes } });
    h.runner.start();
    h.health.report("dp-1", reports("evicted"));
    h.scheduler.advance(0);
    while (h.commands.length === 0) await h.settle();
    expect(episodes.map.get(KEY)).toMatchObject({ attempts: 1 });

    h.health.report("dp-1", reports("healthy"));
    await h.settle();
    expect(episodes.map.has(KEY)).toBe(false);
    hook.finish("ok");
    await h.advanceUntilResults(0, 1);
    expect(episodes.map.has(KEY)).toBe(false);
  });

  it("does not overwrite the next leader's record when leadership moved during the hook", async () => {
    const episodes = memoryEpisodeRecords();
    const hook = heldHook();
    const election = manualElection();
    election.set(true);
    const h = harness({ runCommand: hook.runCommand, election, runner: { episodes } });
    h.runner.start();
    h.health.report("dp-1", reports("evicted"));
    h.scheduler.advance(0);
    while (h.commands.length === 0) await h.settle();

    election.set(false);
    const nextLeaders = { upstream: "agents", address: NODE, attempts: 2, lastAttemptAt: 7 };
    await episodes.put(nextLeaders);
    hook.finish("failed");
    await h.advanceUntilResults(0, 1);
    expect(episodes.map.get(KEY)).toEqual(nextLeaders);
  });

  // A key a deposed leader wrote back, or one from before this process started: the node being
  // healthy is all it takes for no later eviction to read it back.
  it("is deleted on readmission even when this leader holds no episode for the node", async () => {
    const episodes = memoryEpisodeRecords();
    await episodes.put({ upstream: "agents", address: NODE, attempts: 1, lastAttemptAt: 1 });
    const h = harness({ runner: { episodes } });
    h.runner.start();
    h.health.report("dp-1", reports("healthy"));
    await h.settle();
    expect(h.runner.status("agents", NODE)).toBeUndefined();
    expect(episodes.map.has(KEY)).toBe(false);
  });
});
