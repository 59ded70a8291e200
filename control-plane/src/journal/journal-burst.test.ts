import { Registry } from "prom-client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { FleetHealth } from "../health/fleet-health.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { TurnBudget } from "../turns/turn-budget.js";
import type { HealEvent } from "./heal-event.js";
import { Journal, type JournalOptions } from "./journal.js";
import { SUMMARY_SAMPLE_SIZE } from "./journal-backlog.js";

// A fleet losing a whole upstream: every node of it evicted, as each of two data planes
// reports it in one state-of-the-world report. Each change used to cost one etcd commit.
const DATA_PLANES = ["dp-a", "dp-b"];
const NODES_PER_DATA_PLANE = 2_500;
const CHANGES = DATA_PLANES.length * NODES_PER_DATA_PLANE;
/** About CHANGES / 100 commits, with room for the few summary events and trims. */
const MAX_COMMITS = 60;

let etcd: EtcdProcess;
let store: Store | undefined;
let run = 0;

beforeAll(async () => {
  etcd = await startEtcd();
});
afterEach(async () => {
  await store?.close();
  store = undefined;
});
afterAll(async () => {
  await etcd?.stop();
});

function evictedNodes(count: number): ReportedNodeHealth[] {
  return Array.from({ length: count }, (_, i) => ({
    upstream: `up-${i % 50}`,
    address: `127.0.0.1:${20_000 + i}`,
    state: "evicted",
    evidence: "2 consecutive probe failures: connect ECONNREFUSED",
    changedAtMs: 1_700_000_000_000,
  }));
}

/**
 * Journals a burst of CHANGES evictions through the real FleetHealth and Journal on real etcd;
 * resolves once every change is written (as itself or counted in a summary), with the number
 * of commits it took (the store revision's growth: every etcd commit that writes adds one).
 */
async function burst(options: Partial<JournalOptions>) {
  const open = await openEtcdStore({ endpoints: [etcd.endpoint] });
  store = open;
  const prefix = `/burst-${++run}/`;
  const journal = new Journal({ store: open, prefix, ...options });
  const written: HealEvent[] = [];
  let covered = 0;
  const allWritten = new Promise<void>((resolve) => {
    journal.onRecord((event) => {
      written.push(event);
      covered += event.count ?? 1;
      if (covered >= CHANGES) resolve();
    });
  });
  // The whole burst in one turn, as when a report was taken in at once: what is measured is
  // the journal's batching and overflow, which a burst spread over turns (the control plane's
  // intake budget) would let commits drain meanwhile.
  const health = new FleetHealth({ journal, turns: new TurnBudget(10 * CHANGES) });
  const before = (await open.range(prefix)).revision;
  for (const dataPlane of DATA_PLANES) {
    health.report(dataPlane, evictedNodes(NODES_PER_DATA_PLANE));
  }
  await allWritten;
  const after = (await open.range(prefix)).revision;
  await health.close();
  return { journal, written, covered, commits: after - before };
}

describe("Journal under a burst of node changes, on etcd", () => {
  it("writes 5,000 changes in batches, each readable as its own event", async () => {
    const { journal, covered, commits } = await burst({ maxQueued: CHANGES, maxEvents: CHANGES });
    expect(covered).toBe(CHANGES);
    expect(commits).toBeLessThanOrEqual(MAX_COMMITS);
    const events = await journal.list({ limit: CHANGES + 1 });
    expect(events).toHaveLength(CHANGES);
    for (const dataPlane of DATA_PLANES) {
      const own = events.filter((event) => event.source === dataPlane);
      expect(own).toHaveLength(NODES_PER_DATA_PLANE);
      expect(new Set(own.map((event) => event.node)).size).toBe(NODES_PER_DATA_PLANE);
    }
    expect(events.every((event) => event.action === "evict" && event.count === undefined)).toBe(
      true,
    );
  });

  it("counts a burst beyond the queue in one summary per data plane and action", async () => {
    const metrics = new Registry();
    const maxQueued = 1_000;
    const { journal, written, commits } = await burst({ maxQueued, maxEvents: 2_000, metrics });
    expect(commits).toBeLessThanOrEqual(MAX_COMMITS);
    const events = await journal.list({ limit: 2_001 });
    // Every change is in the journal, as itself or in its summary's count.
    expect(events.reduce((sum, event) => sum + (event.count ?? 1), 0)).toBe(CHANGES);
    expect(events.filter((event) => event.count === undefined)).toHaveLength(maxQueued);
    const summaries = events.filter((event) => event.count !== undefined);
    expect(summaries.map((event) => event.source).sort()).toEqual(DATA_PLANES);
    for (const summary of summaries) {
      expect(summary.action).toBe("evict");
      expect(summary.sample).toHaveLength(SUMMARY_SAMPLE_SIZE);
      expect(summary.evidence).toContain(`${summary.count} evict events from ${summary.source}`);
    }
    expect(written).toHaveLength(events.length);
    const summarized = await metrics
      .getSingleMetric("clawgate_heal_events_summarized_total")
      ?.get();
    expect(summarized?.values).toEqual([
      { labels: { action: "evict" }, value: CHANGES - maxQueued },
    ]);
    const actions = await metrics.getSingleMetric("clawgate_heal_actions_total")?.get();
    expect(actions?.values).toEqual([
      { labels: { action: "evict", result: "none" }, value: CHANGES },
    ]);
  });
});
