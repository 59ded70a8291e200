import { afterEach, describe, expect, it, vi } from "vitest";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { Fleet } from "../fleet/fleet.js";
import { recordingJournal } from "../testing/recording-journal.js";
import { FleetHealth, type VerdictChange } from "./fleet-health.js";
import { majorityOf } from "./node-verdict.js";

const A = "10.0.0.1:9001";
const B = "10.0.0.2:9001";

function node(address: string, state: string, evidence = ""): ReportedNodeHealth {
  return { upstream: "agents", address, state, evidence, changedAtMs: 1_700_000_000_000n };
}

function harness() {
  const { journal, recorded } = recordingJournal();
  const health = new FleetHealth({ journal });
  const changes: VerdictChange[] = [];
  health.onVerdict((change) => changes.push(change));
  return { health, recorded, changes };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("majorityOf", () => {
  it.each([
    [{ healthy: 0, quarantined: 0, evicted: 0 }, "unreported"],
    [{ healthy: 1, quarantined: 0, evicted: 0 }, "healthy"],
    [{ healthy: 0, quarantined: 0, evicted: 1 }, "evicted"],
    [{ healthy: 1, quarantined: 0, evicted: 1 }, "split"],
    [{ healthy: 1, quarantined: 0, evicted: 2 }, "evicted"],
    [{ healthy: 1, quarantined: 1, evicted: 1 }, "split"],
    [{ healthy: 2, quarantined: 1, evicted: 2 }, "split"],
    [{ healthy: 0, quarantined: 2, evicted: 1 }, "quarantined"],
  ] as const)("%j -> %s", (counts, verdict) => {
    expect(majorityOf(counts)).toBe(verdict);
  });
});

describe("FleetHealth", () => {
  it("counts each data plane's latest report per node and gives the majority", () => {
    const { health } = harness();
    health.report("dp-1", [node(A, "healthy"), node(B, "evicted", "connect ECONNREFUSED")]);
    health.report("dp-2", [node(A, "healthy"), node(B, "evicted", "connect ECONNREFUSED")]);
    health.report("dp-3", [node(A, "quarantined"), node(B, "healthy")]);
    expect(
      health
        .upstream("agents")
        .map((n) => [n.address, n.healthy, n.quarantined, n.evicted, n.total, n.majority]),
    ).toEqual([
      [A, 2, 1, 0, 3, "healthy"],
      [B, 1, 0, 2, 3, "evicted"],
    ]);
    expect(health.node("agents", B)?.reports).toEqual([
      {
        dataPlane: "dp-1",
        state: "evicted",
        evidence: "connect ECONNREFUSED",
        changedAt: "2023-11-14T22:13:20.000Z",
      },
      {
        dataPlane: "dp-2",
        state: "evicted",
        evidence: "connect ECONNREFUSED",
        changedAt: "2023-11-14T22:13:20.000Z",
      },
      { dataPlane: "dp-3", state: "healthy", evidence: "", changedAt: "2023-11-14T22:13:20.000Z" },
    ]);
    // A newer report replaces the old one whole: B is gone from dp-3's view.
    health.report("dp-3", [node(A, "healthy")]);
    expect(health.node("agents", B)).toMatchObject({ evicted: 2, total: 2, majority: "evicted" });
    expect(health.upstream("tools")).toEqual([]);
  });

  it("journals each data plane's change of a node once, with that data plane as source", () => {
    const { health, recorded } = harness();
    health.report("dp-1", [node(A, "healthy")]);
    health.report("dp-1", [node(A, "healthy")]);
    expect(recorded).toEqual([]);
    health.report("dp-1", [node(A, "quarantined", "refused on a live request")]);
    health.report("dp-1", [node(A, "evicted", "2 probe failures")]);
    health.report("dp-1", [node(A, "evicted", "2 probe failures")]);
    health.report("dp-2", [node(A, "evicted", "probe timeout")]);
    health.report("dp-1", [node(A, "healthy", "2 probe successes")]);
    expect(recorded).toEqual([
      {
        upstream: "agents",
        node: A,
        action: "quarantine",
        evidence: "refused on a live request",
        source: "dp-1",
      },
      {
        upstream: "agents",
        node: A,
        action: "evict",
        evidence: "2 probe failures",
        source: "dp-1",
      },
      { upstream: "agents", node: A, action: "evict", evidence: "probe timeout", source: "dp-2" },
      {
        upstream: "agents",
        node: A,
        action: "readmit",
        evidence: "2 probe successes",
        source: "dp-1",
      },
    ]);
  });

  it("tells listeners when the majority verdict changes, and only then", () => {
    const { health, changes } = harness();
    health.report("dp-1", [node(A, "evicted")]);
    health.report("dp-2", [node(A, "healthy")]);
    health.report("dp-3", [node(A, "evicted")]);
    health.report("dp-3", [node(A, "evicted")]);
    health.report("dp-2", [node(A, "evicted")]);
    health.drop("dp-1");
    health.report("dp-2", [node(A, "healthy")]);
    health.report("dp-3", [node(A, "healthy")]);
    expect(changes.map((c) => `${c.previous}->${c.majority}`)).toEqual([
      "unreported->evicted",
      "evicted->split",
      "split->evicted",
      "evicted->split",
      "split->healthy",
    ]);
    expect(health.nodesWhere("healthy").map((n) => n.address)).toEqual([A]);
    health.drop("dp-2");
    health.drop("dp-3");
    expect(changes.at(-1)).toMatchObject({ previous: "healthy", majority: "unreported" });
    expect(health.node("agents", A)).toBeUndefined();
  });

  it("ignores states it does not know", () => {
    const { health, recorded } = harness();
    health.report("dp-1", [node(A, "exploded"), node(B, "evicted")]);
    expect(health.node("agents", A)).toBeUndefined();
    expect(recorded.map((e) => e.node)).toEqual([B]);
  });

  it("drops a data plane's report when it stays disconnected past the grace, not before", () => {
    vi.useFakeTimers();
    const fleet = new Fleet();
    const health = new FleetHealth({ fleet, reconnectGraceMs: 50 });
    const hello = { hostname: "h", softwareVersion: "1", lastAppliedVersion: 0 };
    const first = fleet.connected("dp-1", hello);
    fleet.healthReported("dp-1", first, [node(A, "evicted")]);
    expect(health.node("agents", A)?.total).toBe(1);
    // A report on a stream that is no longer the data plane's current one is ignored.
    const second = fleet.connected("dp-1", hello);
    fleet.healthReported("dp-1", first, [node(A, "healthy")]);
    expect(health.node("agents", A)?.majority).toBe("evicted");
    fleet.disconnected("dp-1", second);
    // Reconnecting within the grace keeps the report.
    const third = fleet.connected("dp-1", hello);
    vi.advanceTimersByTime(1_000);
    expect(health.node("agents", A)?.total).toBe(1);
    const changes: VerdictChange[] = [];
    health.onVerdict((change) => changes.push(change));
    fleet.disconnected("dp-1", third);
    vi.advanceTimersByTime(49);
    expect(changes).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(changes.map((c) => c.majority)).toEqual(["unreported"]);
    expect(health.node("agents", A)).toBeUndefined();
    health.close();
    vi.useRealTimers();
  });
});
