import { describe, expect, it } from "vitest";
import type { HealEvent } from "../journal/heal-event.js";
import { backoffDelay } from "./backoff.js";
import { harness, manualElection, NODE, reports } from "./runner-harness.js";

describe("backoffDelay", () => {
  it("starts at the initial wait, doubles, and stops at the cap", () => {
    const policy = { initialMs: 5_000, maxMs: 300_000 };
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((n) => backoffDelay(n, policy))).toEqual([
      5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000,
    ]);
  });
});

describe("RemediationRunner", () => {
  it("remediates a node the majority evicted, backs off between attempts, stops at the maximum", async () => {
    const h = harness({ outcomes: ["failed", "timeout", "failed"] });
    h.runner.start();
    h.health.report("dp-1", reports("evicted"));
    h.health.report("dp-2", reports("evicted"));
    h.health.report("dp-3", reports("healthy"));
    await h.advanceUntilResults(0, 1);
    expect(h.commands).toEqual([["systemctl", "restart", "agent@9001.service"]]);

    // 5 s, then 10 s: nothing a millisecond early, the attempt right on time.
    h.scheduler.advance(4_999);
    await h.settle();
    expect(h.commands).toHaveLength(1);
    await h.advanceUntilResults(1, 2);
    h.scheduler.advance(9_999);
    await h.settle();
    expect(h.commands).toHaveLength(2);
    await h.advanceUntilResults(1, 3);

    // Three attempts is the default maximum for one eviction episode.
    h.scheduler.advance(3_600_000);
    await h.settle();
    expect(h.commands).toHaveLength(3);
    expect(h.results.map((r) => [r.attempt, r.outcome])).toEqual([
      [1, "failed"],
      [2, "timeout"],
      [3, "failed"],
    ]);
    expect(h.journal.map((e) => [e.action, e.outcome ?? "-"])).toEqual([
      ["remediation_attempt", "-"],
      ["remediation_result", "failed"],
      ["remediation_attempt", "-"],
      ["remediation_result", "timeout"],
      ["remediation_attempt", "-"],
      ["remediation_result", "failed"],
    ]);
    expect(h.journal[0]).toEqual({
      upstream: "agents",
      node: NODE,
      action: "remediation_attempt",
      evidence:
        "attempt 1 of 3: command systemctl; evicted by 2 of 3 data planes: probe says evicted",
      source: "control-plane/cp-1",
    });
    expect(h.runner.status("agents", NODE)).toMatchObject({ attempts: 3, lastOutcome: "failed" });
  });

  it("ends the episode when the majority readmits the node; the next eviction starts afresh after the backoff", async () => {
    const h = harness({ outcomes: ["ok", "ok", "ok"] });
    h.runner.start();
    h.health.report("dp-1", reports("evicted"));
    await h.advanceUntilResults(0, 1);
    h.health.report("dp-1", reports("healthy"));
    expect(h.runner.status("agents", NODE)).toBeUndefined();
    expect(h.scheduler.pending()).toBe(0);

    // Evicted again at once: a new episode, but the 5 s backoff of the last attempt still holds.
    h.health.report("dp-1", reports("evicted"));
    h.scheduler.advance(4_999);
    await h.settle();
    expect(h.commands).toHaveLength(1);
    await h.advanceUntilResults(1, 2);
    expect(h.runner.status("agents", NODE)).toMatchObject({ attempts: 1, lastOutcome: "ok" });
  });

  it("does not act on a split verdict, and resumes when the majority evicts again", async () => {
    const h = harness();
    h.runner.start();
    h.health.report("dp-1", reports("evicted"));
    h.health.report("dp-2", reports("healthy"));
    h.scheduler.advance(60_000);
    await h.settle();
    expect(h.commands).toEqual([]);
    h.health.report("dp-2", reports("evicted"));
    await h.advanceUntilResults(0, 1);
    expect(h.commands).toHaveLength(1);
  });

  it("runs only while it leads: picks up evicted nodes when elected, cancels retries when not", async () => {
    const election = manualElection();
    const h = harness({ election });
    h.runner.start();
    h.health.report("dp-1", reports("evicted"));
    h.scheduler.advance(60_000);
    await h.settle();
    expect(h.commands).toEqual([]);

    election.set(true);
    await h.advanceUntilResults(0, 1);
    expect(h.scheduler.pending()).toBe(1);
    election.set(false);
    expect(h.scheduler.pending()).toBe(0);
    h.scheduler.advance(3_600_000);
    await h.settle();
    expect(h.commands).toHaveLength(1);
  });

  it("does nothing for an upstream without remediation", async () => {
    const h = harness({ remediation: undefined });
    h.runner.start();
    h.health.report("dp-1", reports("evicted"));
    h.scheduler.advance(60_000);
    await h.settle();
    expect(h.commands).toEqual([]);
    expect(h.journal).toEqual([]);
  });

  it("stops scheduling once stopped", async () => {
    const h = harness();
    h.runner.start();
    h.health.report("dp-1", reports("evicted"));
    await h.runner.stop();
    h.scheduler.advance(60_000);
    await h.settle();
    expect(h.commands).toEqual([]);
  });

  it("after a restart, keeps the journaled episode's backoff and attempt budget", async () => {
    const history: HealEvent[] = [];
    const first = harness({ history, outcomes: ["failed"] });
    first.runner.start();
    first.health.report("dp-1", reports("evicted"));
    await first.advanceUntilResults(0, 1);
    await first.runner.stop();

    // The next process, 1 s later, hears the same data plane report the node still evicted.
    const second = harness({ history, start: first.scheduler.now() + 1_000, outcomes: ["failed"] });
    second.runner.start();
    second.health.report("dp-1", reports("evicted"));
    await second.settle();
    second.scheduler.advance(3_999);
    await second.settle();
    expect(second.commands).toEqual([]);
    await second.advanceUntilResults(1, 1);
    expect(second.results.map((r) => r.attempt)).toEqual([2]);

    // A third start after the budget (3 attempts) is spent runs nothing at all.
    history.push({
      ...history.at(-2)!,
      id: "x",
      evidence: "attempt 3 of 3",
    });
    const third = harness({ history, start: second.scheduler.now() + 3_600_000 });
    third.runner.start();
    third.health.report("dp-1", reports("evicted"));
    third.scheduler.advance(3_600_000);
    await third.settle();
    expect(third.commands).toEqual([]);

    // Once a data plane readmitted the node, a new eviction is a new episode: acted on at once.
    history.push({ ...history.at(-1)!, id: "y", action: "readmit", source: "dp-1" });
    const fourth = harness({ history, start: third.scheduler.now() });
    fourth.runner.start();
    fourth.health.report("dp-1", reports("evicted"));
    await fourth.advanceUntilResults(0, 1);
    expect(fourth.results.map((r) => r.attempt)).toEqual([1]);
  });
});
