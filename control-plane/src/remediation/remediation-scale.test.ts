import { describe, expect, it } from "vitest";
import type { HealEvent } from "../journal/heal-event.js";
import type { ActionResult } from "./action-result.js";
import { harness, memoryEpisodeRecords, NODE, reports } from "./runner-harness.js";

const nodes = (count: number) => Array.from({ length: count }, (_, i) => `10.0.1.${i + 1}:9001`);

// Review 20b M6: remediation at the scale of a rack gone.
describe("remediation at scale", () => {
  it("runs at most maxConcurrent hooks at once; the rest wait their turn", async () => {
    const finish: Array<(result: ActionResult) => void> = [];
    const h = harness({
      runner: { maxConcurrent: 2 },
      runCommand: () => new Promise((resolve) => finish.push(resolve)),
    });
    h.runner.start();
    for (const address of nodes(10)) h.health.report(`dp-${address}`, reports("evicted", address));
    h.scheduler.advance(0);
    for (let i = 0; i < 5; i++) await h.settle();
    expect(h.commands).toHaveLength(2);

    finish.shift()?.({ outcome: "ok", evidence: "exit 0" });
    while (h.commands.length < 3) await h.settle();
    for (let i = 0; i < 5; i++) await h.settle();
    expect(h.commands).toHaveLength(3);
    while (h.commands.length < 10) {
      finish.shift()?.({ outcome: "ok", evidence: "exit 0" });
      await h.settle();
    }
    for (const resolve of finish.splice(0)) resolve({ outcome: "ok", evidence: "exit 0" });
  });

  it("reads the journal once for a leader's whole pass over its evicted nodes", async () => {
    const h = harness({ outcomes: Array(20).fill("ok") });
    h.runner.start();
    for (const address of nodes(20)) h.health.report(`dp-${address}`, reports("evicted", address));
    await h.advanceUntilResults(0, 20);
    expect(h.reads).toHaveLength(1);
  });

  it("does not restart a node merely because the control plane restarted after a burst flooded the journal", async () => {
    const episodes = memoryEpisodeRecords();
    const history: HealEvent[] = [];
    const first = harness({ history, outcomes: ["failed"], runner: { episodes } });
    first.runner.start();
    first.health.report("dp-1", reports("evicted"));
    await first.advanceUntilResults(0, 1);
    await first.runner.stop();

    // The burst's own events pushed the node's attempt out of the journal's newest events.
    const flood = history.filter((event) => event.node !== NODE);
    for (let i = 0; i < 1_000; i++) {
      flood.push({ ...history[0]!, id: `f${i}`, node: `10.9.${i >> 8}.${i & 255}:9001` });
    }
    const second = harness({
      history: flood,
      start: first.scheduler.now() + 1_000,
      outcomes: ["failed"],
      runner: { episodes },
    });
    second.runner.start();
    second.health.report("dp-1", reports("evicted"));
    second.scheduler.advance(3_999);
    await second.settle();
    expect(second.commands).toEqual([]);
    await second.advanceUntilResults(1, 1);
    expect(second.results.map((r) => r.attempt)).toEqual([2]);

    // Readmitted: the stored episode is over, and gone.
    second.health.report("dp-1", reports("healthy"));
    await second.settle();
    expect(episodes.map.size).toBe(0);
  });

  it("forgets nodes that leave the fleet: its maps do not grow with registry churn", async () => {
    const h = harness({ outcomes: Array(50).fill("ok") });
    h.runner.start();
    for (const address of nodes(50)) h.health.report(`dp-${address}`, reports("evicted", address));
    await h.advanceUntilResults(0, 50);
    expect(h.runner.bookkeeping()).toEqual({ episodes: 50, backoffs: 50, recalled: 50 });
    // Deregistered: no data plane reports them any more.
    for (const address of nodes(50)) h.health.report(`dp-${address}`, []);
    expect(h.runner.bookkeeping()).toEqual({ episodes: 0, backoffs: 0, recalled: 0 });
  });
});
