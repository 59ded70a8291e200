import { afterEach, describe, expect, it } from "vitest";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { evictedNodes } from "../testing/evicted-nodes.js";
import { recordingJournal } from "../testing/recording-journal.js";
import { FleetHealth } from "./fleet-health.js";
import { healthReportKey } from "./health-report-key.js";
import { SharedHealthReports } from "./shared-health-reports.js";
import { parseHealthReport } from "./stored-health-report.js";

/*
 * A whole 20,000-node report is taken in over many turns; what a data plane sends right after
 * it (a changes-only report, a drop) waits for it, here with the view shared through the store.
 */

const PREFIX = "/clawgate-health-in-turns-test/";
const NODES = 20_000;
/** Waits are on events; this only turns a hang into a readable failure. */
const WAIT_MS = 20_000;

let store: Store | undefined;
let health: FleetHealth | undefined;
afterEach(async () => {
  await health?.close();
  await store?.close();
  health = undefined;
  store = undefined;
});

/** Resolves once `predicate` holds, re-checked after every change of the view. */
function until(view: FleetHealth, what: string, predicate: () => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), WAIT_MS);
    const off = view.onUpdate(() => {
      if (!predicate()) return;
      clearTimeout(timer);
      off();
      resolve();
    });
  });
}

/** A fresh embedded store (closed after the test) and the shared reports on it. */
async function sharedReports(): Promise<{ shared: SharedHealthReports; opened: Store }> {
  const opened = await openEmbeddedStore({});
  store = opened;
  const shared = new SharedHealthReports({
    store: opened,
    prefix: PREFIX,
    replicaId: "cp-1",
    coalesceMs: 0,
    // Every view written at once: the tests read the store for the newest one.
    writeNodesPerSecond: 1e9,
  });
  return { shared, opened };
}

describe("FleetHealth shared, a whole report in turns", () => {
  it("applies a changes-only report sent during a whole report's intake on it, in the view and the store", async () => {
    const { shared, opened } = await sharedReports();
    health = new FleetHealth({ shared });
    await health.start();
    const nodes = evictedNodes(NODES);
    const back: ReportedNodeHealth = { ...nodes[7]!, state: "healthy", changedAtMs: 1n << 42n };
    const view = health;
    const settled = until(
      view,
      "the view to hold the whole report with the change on it",
      () =>
        view.node(back.upstream, back.address)?.majority === "healthy" &&
        view.nodesWhere("evicted").length === NODES - 1,
    );

    view.report("dp-1", nodes);
    // Not in the view yet: the report is still being taken in, and the changes wait for it.
    expect(view.node(back.upstream, back.address)).toBeUndefined();
    expect(view.reportChanges("dp-1", { nodes: [back], removed: [] })).toBe(true);
    await settled;

    const stored = await opened.get(healthReportKey(PREFIX, "dp-1"));
    const parsed = await parseHealthReport("dp-1", stored?.value ?? "");
    if (!parsed.ok) throw new Error(parsed.reason);
    expect(parsed.report.nodes).toHaveLength(NODES);
    expect(parsed.report.nodes.find((n) => n.address === back.address)?.state).toBe("healthy");
  });

  it("takes nothing more in once closed: no store write, journal entry or listener call after close, nothing left pending", async () => {
    const { shared, opened } = await sharedReports();
    const { journal, recorded } = recordingJournal();
    const view = new FleetHealth({ shared, journal });
    await view.start();
    const told: string[] = [];
    view.onUpdate((dataPlane) => told.push(`update ${dataPlane}`));
    view.onVerdict((change) => told.push(`verdict ${change.address}`));
    const nodes = evictedNodes(NODES);
    // Queued over many turns: the report, the changes behind it, and a drop behind those.
    view.report("dp-1", nodes);
    view.reportChanges("dp-1", { nodes: [{ ...nodes[7]!, state: "healthy" }], removed: [] });
    view.drop("dp-1");
    expect(view.queued("dp-1")).toBe(3);

    await view.close();
    // Nothing left to run later: what was queued ended with close().
    const queuedAfterClose = view.queued("dp-1");
    await view.settled();
    // Nor does anything arrive after close.
    view.report("dp-2", nodes.slice(0, 10));
    expect(view.queued("dp-2")).toBe(0);
    await view.settled();

    expect(recorded).toEqual([]);
    expect(told).toEqual([]);
    expect(await opened.get(healthReportKey(PREFIX, "dp-1"))).toBeUndefined();
    expect(view.node(nodes[0]!.upstream, nodes[0]!.address)).toBeUndefined();
    expect(queuedAfterClose).toBe(0);
  });
});
