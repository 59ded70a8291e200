import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { recordingJournal } from "../testing/recording-journal.js";
import { FleetHealth, type VerdictChange } from "./fleet-health.js";
import { healthReportKey } from "./health-report-key.js";
import { SharedHealthReports } from "./shared-health-reports.js";

/*
 * A data plane sends its whole view whenever one node changes state (issue 9: 20,000 nodes a
 * report). The control plane acts on what changed: these tests check what a listener, the
 * journal and the store see when a report repeats, changes, adds or drops nodes.
 */

const PREFIX = "/clawgate-health-changes-test/";
/** Waits are on events; this only turns a hang into a readable failure. */
const WAIT_MS = 10_000;

function node(address: string, state: string, evidence = ""): ReportedNodeHealth {
  return { upstream: "agents", address, state, evidence, changedAtMs: 1_700_000_000_000n };
}

function many(count: number, state: (i: number) => string): ReportedNodeHealth[] {
  return Array.from({ length: count }, (_, i) =>
    node(`10.0.${Math.floor(i / 250)}.${i % 250}:80`, state(i)),
  );
}

function observed(health: FleetHealth) {
  const updates: string[] = [];
  const verdicts: VerdictChange[] = [];
  health.onUpdate((dataPlane) => updates.push(dataPlane));
  health.onVerdict((change) => verdicts.push(change));
  return { updates, verdicts };
}

describe("FleetHealth, report by report", () => {
  // Reports of hundreds of nodes take more than one turn's intake budget: each test waits for
  // the view to settle rather than expect it in the same turn.
  it("announces and journals nothing when a report repeats the previous one", async () => {
    const { journal, recorded } = recordingJournal();
    const health = new FleetHealth({ journal });
    const { updates, verdicts } = observed(health);
    const nodes = many(500, (i) => (i % 2 === 0 ? "evicted" : "healthy"));
    health.report("dp-1", nodes);
    await health.settled();
    expect([updates.length, verdicts.length, recorded.length]).toEqual([1, 500, 250]);

    // The same view again, as freshly decoded objects.
    health.report(
      "dp-1",
      nodes.map((n) => ({ ...n })),
    );
    await health.settled();
    expect([updates.length, verdicts.length, recorded.length]).toEqual([1, 500, 250]);
  });

  it.each([
    {
      name: "one node changes state",
      next: (nodes: ReportedNodeHealth[]) =>
        nodes.map((n, i) => (i === 7 ? { ...n, state: "evicted" } : n)),
      verdicts: [["10.0.0.7:80", "healthy", "split"]],
    },
    {
      name: "a node leaves the data plane's config",
      next: (nodes: ReportedNodeHealth[]) => nodes.filter((_, i) => i !== 3),
      verdicts: [],
    },
    {
      name: "a node is new",
      next: (nodes: ReportedNodeHealth[]) => [...nodes, node("10.9.9.9:80", "quarantined")],
      verdicts: [["10.9.9.9:80", "unreported", "quarantined"]],
    },
  ])("counts only what changed when $name", async ({ next, verdicts: expected }) => {
    const health = new FleetHealth();
    const nodes = many(300, () => "healthy");
    health.report("dp-1", nodes);
    health.report("dp-2", nodes);
    await health.settled();
    const { updates, verdicts } = observed(health);

    health.report("dp-1", next(nodes));
    await health.settled();
    expect(updates).toEqual(["dp-1"]);
    expect(verdicts.map((v) => [v.address, v.previous, v.majority])).toEqual(expected);
    // Every node's counts still match the reports that explain them.
    for (const summary of health.upstream("agents")) {
      const states = summary.reports.map((r) => r.state);
      expect([summary.healthy, summary.quarantined, summary.evicted, summary.total]).toEqual([
        states.filter((s) => s === "healthy").length,
        states.filter((s) => s === "quarantined").length,
        states.filter((s) => s === "evicted").length,
        states.length,
      ]);
    }
  });

  it("recounts a dropped data plane's nodes without it", async () => {
    const health = new FleetHealth();
    health.report(
      "dp-1",
      many(100, () => "evicted"),
    );
    health.report(
      "dp-2",
      many(100, () => "evicted"),
    );
    health.report(
      "dp-3",
      many(100, () => "healthy"),
    );
    await health.settled();
    expect(health.nodesWhere("evicted")).toHaveLength(100);
    health.drop("dp-1");
    await health.settled();
    expect(health.nodesWhere("split")).toHaveLength(100);
    expect(health.node("agents", "10.0.0.0:80")?.total).toBe(2);
  });
});

describe("FleetHealth shared through the store, report by report", () => {
  let store: Store;
  let puts: string[];
  let health: FleetHealth;
  beforeEach(async () => {
    const inner = await openEmbeddedStore({});
    puts = [];
    // Counts the report writes that reach the store.
    store = Object.create(inner) as Store;
    store.commit = (compares, operations) => {
      for (const op of operations) if (op.type === "put") puts.push(op.key);
      return inner.commit(compares, operations);
    };
    store.close = () => inner.close();
    health = new FleetHealth({
      shared: new SharedHealthReports({
        store,
        prefix: PREFIX,
        replicaId: "cp-1",
        coalesceMs: 0,
      }),
    });
    await health.start();
  });
  afterEach(async () => {
    await health.close();
    await store.close();
  });

  /** Resolves once `predicate` holds after a change of the view; a hang fails after WAIT_MS. */
  function viewed(predicate: () => boolean): Promise<void> {
    return new Promise((resolve, reject) => {
      if (predicate()) return resolve();
      const timer = setTimeout(() => {
        off();
        reject(new Error("timed out waiting for the view"));
      }, WAIT_MS);
      const off = health.onUpdate(() => {
        if (!predicate()) return;
        clearTimeout(timer);
        off();
        resolve();
      });
    });
  }

  it("stores a report only when it changed, and shows each in the view", async () => {
    const nodes = many(50, () => "healthy");
    health.report("dp-1", nodes);
    await viewed(() => health.node("agents", "10.0.0.0:80")?.healthy === 1);
    expect(puts).toEqual([healthReportKey(PREFIX, "dp-1")]);

    health.report(
      "dp-1",
      nodes.map((n) => ({ ...n })),
    );
    health.report(
      "dp-1",
      nodes.map((n, i) => (i === 0 ? { ...n, state: "evicted" } : n)),
    );
    await viewed(() => health.node("agents", "10.0.0.0:80")?.evicted === 1);
    expect(puts).toHaveLength(2);
  });

  it("shows its own report from memory, whatever the store hands back", async () => {
    // Each report read back from the store comes back unreadable: a replica that read back
    // its own writes would drop them from its view (as it does another replica's bad value).
    const watch = store.watch.bind(store);
    store.watch = (prefix, from, handlers) =>
      watch(prefix, from, {
        ...handlers,
        onEvents: (events) =>
          handlers.onEvents(events.map((e) => (e.type === "put" ? { ...e, value: "{" } : e))),
      });
    await health.close();
    health = new FleetHealth({
      shared: new SharedHealthReports({ store, prefix: PREFIX, replicaId: "cp-1", coalesceMs: 0 }),
    });
    await health.start();
    const gone: string[] = [];
    health.onUpdate((dataPlane) => {
      if (health.node("agents", "10.0.0.0:80") === undefined) gone.push(dataPlane);
    });

    health.report(
      "dp-1",
      many(10, () => "healthy"),
    );
    await viewed(() => health.node("agents", "10.0.0.0:80")?.healthy === 1);
    health.report(
      "dp-1",
      many(10, () => "evicted"),
    );
    await viewed(() => health.node("agents", "10.0.0.0:80")?.evicted === 1);
    expect(gone).toEqual([]);
  });
});
