import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { HealthChanges, ReportedNodeHealth } from "../fleet/fleet.js";
import { ManualScheduler } from "../remediation/manual-scheduler.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { recordingJournal } from "../testing/recording-journal.js";
import { FleetHealth } from "./fleet-health.js";
import { SharedHealthReports } from "./shared-health-reports.js";
import { parseHealthReport } from "./stored-health-report.js";

/*
 * A data plane on a control plane that takes changes-only reports sends its whole view once
 * after Hello, then only what changed (issue 9). Applied on the whole view, the changes must
 * give the view the equivalent whole report gives, and journal every transition.
 */

const PREFIX = "/clawgate-health-changes-only-test/";
const WAIT_MS = 10_000;

function node(address: string, state: string, at = 1): ReportedNodeHealth {
  return { upstream: "agents", address, state, evidence: "", changedAtMs: 1_700_000_000_000 + at };
}

const start = [
  node("10.0.0.1:80", "healthy"),
  node("10.0.0.2:80", "healthy"),
  node("10.0.0.3:80", "evicted"),
];

function journaled() {
  const { journal, recorded } = recordingJournal();
  return { journal, recorded };
}

/** The view of every node, for comparing two FleetHealth instances. */
function viewOf(health: FleetHealth) {
  return health.upstream("agents").map((n) => ({
    address: n.address,
    majority: n.majority,
    reports: n.reports,
  }));
}

describe("FleetHealth with changes-only reports", () => {
  it.each<{ name: string; changes: HealthChanges; whole: ReportedNodeHealth[] }>([
    {
      name: "a node changes state",
      changes: { nodes: [node("10.0.0.1:80", "evicted", 2)], removed: [] },
      whole: [node("10.0.0.1:80", "evicted", 2), start[1]!, start[2]!],
    },
    {
      name: "a node is new",
      changes: { nodes: [node("10.0.0.9:80", "healthy", 2)], removed: [] },
      whole: [...start, node("10.0.0.9:80", "healthy", 2)],
    },
    {
      name: "a node left the data plane's config",
      changes: { nodes: [], removed: [{ upstream: "agents", address: "10.0.0.3:80" }] },
      whole: [start[0]!, start[1]!],
    },
    {
      name: "a node left and came back",
      changes: {
        nodes: [node("10.0.0.3:80", "healthy", 3)],
        removed: [{ upstream: "agents", address: "10.0.0.3:80" }],
      },
      whole: [start[0]!, start[1]!, node("10.0.0.3:80", "healthy", 3)],
    },
  ])(
    "gives the view and journal of the equivalent whole report when $name",
    ({ changes, whole }) => {
      const byChanges = journaled();
      const viaChanges = new FleetHealth({ journal: byChanges.journal });
      viaChanges.report("dp-1", start);
      expect(viaChanges.reportChanges("dp-1", changes)).toBe(true);

      const byWhole = journaled();
      const viaWhole = new FleetHealth({ journal: byWhole.journal });
      viaWhole.report("dp-1", start);
      viaWhole.report("dp-1", whole);

      expect(viewOf(viaChanges)).toEqual(viewOf(viaWhole));
      expect(byChanges.recorded).toEqual(byWhole.recorded);
      expect(viaChanges.nodesWhere("evicted")).toEqual(viaWhole.nodesWhere("evicted"));
    },
  );

  it("journals both transitions of a node that changed twice between two reports", () => {
    const { journal, recorded } = journaled();
    const health = new FleetHealth({ journal });
    health.report("dp-1", start);
    recorded.length = 0;
    health.reportChanges("dp-1", {
      nodes: [node("10.0.0.2:80", "quarantined", 2), node("10.0.0.2:80", "evicted", 3)],
      removed: [],
    });
    expect(recorded.map((e) => [e.node, e.action, e.source])).toEqual([
      ["10.0.0.2:80", "quarantine", "dp-1"],
      ["10.0.0.2:80", "evict", "dp-1"],
    ]);
    expect(health.node("agents", "10.0.0.2:80")?.majority).toBe("evicted");
  });

  it("announces a verdict change and an update only for what changed", () => {
    const health = new FleetHealth();
    health.report("dp-1", start);
    health.report("dp-2", start);
    const updates: string[] = [];
    const verdicts: string[] = [];
    health.onUpdate((dp) => updates.push(dp));
    health.onVerdict((v) => verdicts.push(`${v.address} ${v.previous} ${v.majority}`));
    health.reportChanges("dp-1", { nodes: [node("10.0.0.1:80", "healthy")], removed: [] });
    expect([updates, verdicts]).toEqual([[], []]);
    health.reportChanges("dp-1", { nodes: [node("10.0.0.1:80", "evicted", 2)], removed: [] });
    expect(updates).toEqual(["dp-1"]);
    expect(verdicts).toEqual(["10.0.0.1:80 healthy split"]);
  });

  it("ignores changes with a warning naming the data plane when it holds no whole report of it", () => {
    const warnings: Array<{ dataPlane?: string; msg: string }> = [];
    const logger = pino(
      { level: "warn" },
      {
        write(line: string) {
          const { dataPlane, msg } = JSON.parse(line) as { dataPlane?: string; msg: string };
          warnings.push({ dataPlane, msg });
        },
      },
    );
    const { journal, recorded } = journaled();
    const health = new FleetHealth({ journal, logger });
    const applied = health.reportChanges("dp-7", {
      nodes: [node("10.0.0.1:80", "evicted")],
      removed: [],
    });
    expect(applied).toBe(false);
    expect(health.upstream("agents")).toEqual([]);
    expect(recorded).toEqual([]);
    expect(warnings).toEqual([
      {
        dataPlane: "dp-7",
        msg: "ignoring a changes-only health report: this control plane holds no whole report of that data plane to apply it on",
      },
    ]);
  });
});

describe("FleetHealth with changes-only reports, shared through the store", () => {
  let store: Store;
  let puts: string[];
  let pacer: ManualScheduler;
  let health: FleetHealth;
  beforeEach(async () => {
    const inner = await openEmbeddedStore({});
    puts = [];
    store = Object.create(inner) as Store;
    store.commit = (compares, operations) => {
      for (const op of operations) if (op.type === "put") puts.push(op.value);
      return inner.commit(compares, operations);
    };
    store.close = () => inner.close();
    pacer = new ManualScheduler();
    health = new FleetHealth({
      shared: new SharedHealthReports({
        store,
        prefix: PREFIX,
        replicaId: "cp-1",
        coalesceMs: 100,
        // 3 nodes at 1 node/s: at most one write every 3 s.
        writeNodesPerSecond: 1,
        pacer,
      }),
    });
    await health.start();
  });
  afterEach(async () => {
    await health.close();
    await store.close();
  });

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

  it("writes the newest whole view, coalescing a large view's writes, and the view follows", async () => {
    health.report("dp-1", start);
    await viewed(() => health.node("agents", "10.0.0.1:80")?.healthy === 1);
    expect(puts).toHaveLength(1);

    // Two reports within the write interval: one write, after it, with both changes.
    health.reportChanges("dp-1", { nodes: [node("10.0.0.1:80", "evicted", 2)], removed: [] });
    health.reportChanges("dp-1", {
      nodes: [],
      removed: [{ upstream: "agents", address: "10.0.0.2:80" }],
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(puts).toHaveLength(1);
    pacer.advance(3_000);
    await viewed(() => health.node("agents", "10.0.0.2:80") === undefined);
    expect(health.node("agents", "10.0.0.1:80")?.majority).toBe("evicted");
    expect(puts).toHaveLength(2);

    const stored = await parseHealthReport("dp-1", puts[1]!);
    expect(stored.ok && stored.report.nodes.map((n) => `${n.address} ${n.state}`)).toEqual([
      "10.0.0.1:80 evicted",
      "10.0.0.3:80 evicted",
    ]);
  });
});
