import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import {
  type HealthChange,
  type HealthState,
  type HealthThresholds,
  NodeHealthTracker,
} from "./node-health.js";

/** One input: a probe result ("ok" / "fail", optionally with its ticket) or a live refusal. */
type Step = "ok" | "fail" | "refused" | { probe: "ok" | "fail"; ticket: number };

function run(steps: readonly Step[], thresholds: Partial<HealthThresholds> = {}) {
  const clock = new FakeClock(1_000);
  const tracker = new NodeHealthTracker(
    "agents",
    "10.0.0.5:8080",
    { unhealthyThreshold: 2, healthyThreshold: 2, ...thresholds },
    clock,
  );
  const changes: HealthChange[] = [];
  const states: HealthState[] = [];
  let ticket = 0;
  for (const step of steps) {
    clock.advance(100);
    let change: HealthChange | undefined;
    if (step === "refused") change = tracker.refused(++ticket);
    else if (typeof step === "string") {
      // A probe started after every refusal so far carries the latest ticket.
      change = tracker.probeResult(step === "ok", { tcpMs: 1, error: step }, ticket);
    } else change = tracker.probeResult(step.probe === "ok", {}, step.ticket);
    if (change) changes.push(change);
    states.push(tracker.state);
  }
  return { tracker, changes, states, clock };
}

const transitions = (changes: readonly HealthChange[]) =>
  changes.map((c) => `${c.from}->${c.to}:${c.reason}`);

describe("NodeHealthTracker", () => {
  const rows: {
    name: string;
    steps: Step[];
    thresholds?: Partial<HealthThresholds>;
    states: HealthState[];
    transitions: string[];
  }[] = [
    {
      name: "one probe failure does not evict at threshold 2",
      steps: ["fail"],
      states: ["healthy"],
      transitions: [],
    },
    {
      name: "two consecutive probe failures evict",
      steps: ["fail", "fail"],
      states: ["healthy", "evicted"],
      transitions: ["healthy->evicted:probe-failures"],
    },
    {
      name: "a success between failures resets the count",
      steps: ["fail", "ok", "fail", "ok", "fail"],
      states: ["healthy", "healthy", "healthy", "healthy", "healthy"],
      transitions: [],
    },
    {
      name: "threshold 3 needs three failures",
      steps: ["fail", "fail", "fail"],
      thresholds: { unhealthyThreshold: 3 },
      states: ["healthy", "healthy", "evicted"],
      transitions: ["healthy->evicted:probe-failures"],
    },
    {
      name: "an evicted node is readmitted after healthyThreshold successes",
      steps: ["fail", "fail", "ok", "ok"],
      states: ["healthy", "evicted", "evicted", "healthy"],
      transitions: ["healthy->evicted:probe-failures", "evicted->healthy:probe-successes"],
    },
    {
      name: "healthyThreshold 3 needs three successes",
      steps: ["fail", "fail", "ok", "ok", "ok"],
      thresholds: { healthyThreshold: 3 },
      states: ["healthy", "evicted", "evicted", "evicted", "healthy"],
      transitions: ["healthy->evicted:probe-failures", "evicted->healthy:probe-successes"],
    },
    {
      name: "flapping while evicted never readmits",
      steps: ["fail", "fail", "ok", "fail", "ok", "fail", "ok", "fail"],
      states: [
        "healthy",
        "evicted",
        "evicted",
        "evicted",
        "evicted",
        "evicted",
        "evicted",
        "evicted",
      ],
      transitions: ["healthy->evicted:probe-failures"],
    },
    {
      name: "flapping while healthy never evicts",
      steps: ["fail", "ok", "fail", "ok", "fail", "ok"],
      states: ["healthy", "healthy", "healthy", "healthy", "healthy", "healthy"],
      transitions: [],
    },
    {
      name: "after readmission the failure count starts from zero",
      steps: ["fail", "fail", "ok", "ok", "fail", "ok", "fail"],
      states: ["healthy", "evicted", "evicted", "healthy", "healthy", "healthy", "healthy"],
      transitions: ["healthy->evicted:probe-failures", "evicted->healthy:probe-successes"],
    },
    {
      name: "a refusal quarantines at once, without evicting",
      steps: ["refused"],
      states: ["quarantined"],
      transitions: ["healthy->quarantined:connection-refused"],
    },
    {
      name: "refusals alone never evict",
      steps: ["refused", "refused", "refused", "refused"],
      states: ["quarantined", "quarantined", "quarantined", "quarantined"],
      transitions: ["healthy->quarantined:connection-refused"],
    },
    {
      name: "a confirming probe that succeeds clears the quarantine",
      steps: ["refused", "ok"],
      states: ["quarantined", "healthy"],
      transitions: [
        "healthy->quarantined:connection-refused",
        "quarantined->healthy:probe-cleared",
      ],
    },
    {
      name: "a failed confirming probe counts one failure; the next failure evicts",
      steps: ["refused", "fail", "fail"],
      states: ["quarantined", "quarantined", "evicted"],
      transitions: [
        "healthy->quarantined:connection-refused",
        "quarantined->evicted:probe-failures",
      ],
    },
    {
      name: "a probe failure just before the refusal counts with the confirming one",
      steps: ["fail", "refused", "fail"],
      states: ["healthy", "quarantined", "evicted"],
      transitions: [
        "healthy->quarantined:connection-refused",
        "quarantined->evicted:probe-failures",
      ],
    },
    {
      name: "at unhealthyThreshold 1 the confirming probe evicts",
      steps: ["refused", "fail"],
      thresholds: { unhealthyThreshold: 1 },
      states: ["quarantined", "evicted"],
      transitions: [
        "healthy->quarantined:connection-refused",
        "quarantined->evicted:probe-failures",
      ],
    },
    {
      name: "a confirming failure then a success clears the quarantine",
      steps: ["refused", "fail", "ok"],
      states: ["quarantined", "quarantined", "healthy"],
      transitions: [
        "healthy->quarantined:connection-refused",
        "quarantined->healthy:probe-cleared",
      ],
    },
    {
      name: "a refusal of an evicted node changes nothing",
      steps: ["fail", "fail", "refused", "ok", "ok"],
      states: ["healthy", "evicted", "evicted", "evicted", "healthy"],
      transitions: ["healthy->evicted:probe-failures", "evicted->healthy:probe-successes"],
    },
    {
      name: "a probe that started before the refusal neither clears nor counts",
      steps: ["refused", { probe: "ok", ticket: 0 }, { probe: "fail", ticket: 0 }, "fail", "fail"],
      states: ["quarantined", "quarantined", "quarantined", "quarantined", "evicted"],
      transitions: [
        "healthy->quarantined:connection-refused",
        "quarantined->evicted:probe-failures",
      ],
    },
  ];

  for (const row of rows) {
    it(row.name, () => {
      const { changes, states } = run(row.steps, row.thresholds);
      expect(states).toEqual(row.states);
      expect(transitions(changes)).toEqual(row.transitions);
    });
  }

  it("only a healthy node is usable", () => {
    const usable = (steps: Step[]) => run(steps).tracker.usable;
    expect(usable([])).toBe(true);
    expect(usable(["refused"])).toBe(false);
    expect(usable(["fail", "fail"])).toBe(false);
    expect(usable(["refused", "ok"])).toBe(true);
  });

  it("each change carries the node, the deciding evidence and the clock time", () => {
    const clock = new FakeClock(5_000);
    const tracker = new NodeHealthTracker(
      "agents",
      "10.0.0.5:8080",
      { unhealthyThreshold: 2, healthyThreshold: 2 },
      clock,
    );
    expect(tracker.lastChangeAt).toBe(5_000);
    tracker.probeResult(false, { tcpMs: 2, httpStatus: 500, error: "http 500" }, 0);
    clock.advance(10_000);
    const evidence = { tcpMs: 1.5, httpStatus: 200, bodyStatus: "degraded", error: "status" };
    const change = tracker.probeResult(false, evidence, 0);
    expect(change).toEqual({
      upstream: "agents",
      address: "10.0.0.5:8080",
      from: "healthy",
      to: "evicted",
      reason: "probe-failures",
      evidence,
      at: 15_000,
    });
    expect(tracker.lastChangeAt).toBe(15_000);
    expect(tracker.lastEvidence).toBe(evidence);

    clock.advance(1_000);
    tracker.probeResult(true, { tcpMs: 1 }, 0);
    expect(tracker.lastChangeAt).toBe(15_000);
  });

  it("changed thresholds apply from the next result and keep the counts", () => {
    const clock = new FakeClock();
    const tracker = new NodeHealthTracker(
      "agents",
      "a:1",
      { unhealthyThreshold: 3, healthyThreshold: 2 },
      clock,
    );
    tracker.probeResult(false, {}, 0);
    tracker.probeResult(false, {}, 0);
    expect(tracker.state).toBe("healthy");
    tracker.setThresholds({ unhealthyThreshold: 5, healthyThreshold: 2 });
    tracker.probeResult(false, {}, 0);
    expect(tracker.state).toBe("healthy");
    tracker.setThresholds({ unhealthyThreshold: 2, healthyThreshold: 2 });
    // Three failures so far; the fourth is compared with the new threshold of 2.
    expect(tracker.probeResult(false, {}, 0)?.to).toBe("evicted");
  });
});
