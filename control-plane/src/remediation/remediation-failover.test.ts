import { describe, expect, it } from "vitest";
import type { HealEvent } from "../journal/heal-event.js";
import type { RunCommandOptions } from "./run-command.js";
import { harness, manualElection, NODE, policy, reports } from "./runner-harness.js";

// Review 20b M7: a leader failover could run the same hook twice at once.
describe("remediation across a change of leader", () => {
  it("kills the running hook when leadership is lost", async () => {
    const election = manualElection();
    const signals: Array<AbortSignal | undefined> = [];
    const h = harness({
      election,
      runCommand: (_argv, options: RunCommandOptions) => {
        signals.push(options.signal);
        // A hook that runs until it is killed.
        return new Promise((resolve) => {
          options.signal?.addEventListener("abort", () =>
            resolve({ outcome: "failed", evidence: "sh aborted, killed" }),
          );
        });
      },
    });
    h.runner.start();
    election.set(true);
    h.health.report("dp-1", reports("evicted"));
    h.scheduler.advance(0);
    while (h.commands.length === 0) await h.settle();
    expect(signals[0]?.aborted).toBe(false);

    election.set(false);
    await h.advanceUntilResults(0, 1);
    expect(signals[0]?.aborted).toBe(true);
    expect(h.results.map((r) => [r.attempt, r.outcome])).toEqual([[1, "failed"]]);
  });

  it("a new leader that finds an attempt without a result waits out that hook's whole timeout", async () => {
    const started = 5_000_000;
    // The old leader journaled its attempt, then died (or lost the lease) while the hook ran.
    const history: HealEvent[] = [
      {
        id: "0",
        time: new Date(started).toISOString(),
        upstream: "agents",
        node: NODE,
        action: "remediation_attempt",
        evidence: "attempt 1 of 3",
        source: "control-plane/cp-0",
      },
    ];
    const h = harness({
      history,
      start: started + 1_000,
      outcomes: ["ok"],
      remediation: policy({
        command: ["systemctl", "restart", "agent@{port}.service"],
        timeoutMs: 30_000,
        backoffMs: 5_000,
      }),
    });
    h.runner.start();
    h.health.report("dp-1", reports("evicted"));
    // The backoff (5 s) is long over; the old hook may still run for its 30 s, plus the kill grace.
    h.scheduler.advance(started + 30_000 + 2_000 - 1 - h.scheduler.now());
    await h.settle();
    expect(h.commands).toEqual([]);
    await h.advanceUntilResults(1, 1);
    expect(h.results.map((r) => r.attempt)).toEqual([2]);
  });
});
