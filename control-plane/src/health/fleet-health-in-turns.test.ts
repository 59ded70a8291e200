import { afterEach, describe, expect, it } from "vitest";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { evictedNodes } from "../testing/evicted-nodes.js";
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

describe("FleetHealth shared, a whole report in turns", () => {
  it("applies a changes-only report sent during a whole report's intake on it, in the view and the store", async () => {
    store = await openEmbeddedStore({});
    const shared = new SharedHealthReports({
      store,
      prefix: PREFIX,
      replicaId: "cp-1",
      coalesceMs: 0,
      // Every view written at once: the test reads the store for the newest one.
      writeNodesPerSecond: 1e9,
    });
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

    const stored = await store.get(healthReportKey(PREFIX, "dp-1"));
    const parsed = await parseHealthReport("dp-1", stored?.value ?? "");
    if (!parsed.ok) throw new Error(parsed.reason);
    expect(parsed.report.nodes).toHaveLength(NODES);
    expect(parsed.report.nodes.find((n) => n.address === back.address)?.state).toBe("healthy");
  });
});
