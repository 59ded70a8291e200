import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { FleetHealth } from "../health/fleet-health.js";
import { SharedHealthReports } from "../health/shared-health-reports.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import { evictedNodes } from "../testing/evicted-nodes.js";
import { watchLongestGap } from "./longest-gap.js";

/**
 * How long a control plane blocks its event loop while it takes in the first node-health reports
 * of data planes that just booted (issue 9): each routes to `nodes` nodes that all refuse
 * connections, so each reports them all healthy first, then sends its whole view again as its
 * probes evict them a slice at a time. The reports go through FleetHealth and, as with etcd,
 * through SharedHealthReports (here on the embedded store, so the figures are the control
 * plane's own work, not etcd's). Measures and prints; asserts nothing.
 *
 *   node control-plane/dist/bench/health-report-intake.js [dataPlanes] [nodes] [steps]
 */
const dataPlanes = Number(process.argv[2] ?? 4);
const nodeCount = Number(process.argv[3] ?? 20_000);
const steps = Number(process.argv[4] ?? 10);

const evicted = evictedNodes(nodeCount);
const healthy = evicted.map((node) => ({ ...node, state: "healthy", evidence: "" }));
/** The view after `step` of `steps` slices were evicted, built before measuring starts. */
function view(step: number): ReportedNodeHealth[] {
  const cut = Math.round((nodeCount * step) / steps);
  return evicted.map((node, i) => ({ ...(i < cut ? node : healthy[i]) }) as ReportedNodeHealth);
}
const views = Array.from({ length: steps + 1 }, (_, step) => view(step));

const store = await openEmbeddedStore({});
const shared = new SharedHealthReports({ store, prefix: "/bench/", replicaId: "cp-1" });
const health = new FleetHealth({ shared });
await health.start();
let verdicts = 0;
health.onVerdict(() => verdicts++);

// The last report of every data plane is in the view once it counts every node evicted.
const settled = new Promise<void>((resolve) => {
  const off = health.onUpdate(() => {
    // The last node of each report is the last one evicted.
    const last = evicted[nodeCount - 1] as ReportedNodeHealth;
    if (health.node(last.upstream, last.address)?.evicted !== dataPlanes) return;
    off();
    resolve();
  });
});

const gap = watchLongestGap();
const started = performance.now();
for (let step = 0; step <= steps; step++) {
  for (let d = 1; d <= dataPlanes; d++) {
    health.report(`dp-${d}`, views[step] as ReportedNodeHealth[]);
    // Reports from separate streams arrive in separate turns.
    await new Promise((resolve) => setImmediate(resolve));
  }
}
await settled;
const longestGapMs = gap.stop();
console.log(
  `${dataPlanes} data planes x ${steps + 1} reports of ${nodeCount} nodes: ` +
    `${(performance.now() - started).toFixed(0)} ms in all, longest turn ${longestGapMs.toFixed(1)} ms ` +
    `(1 ms timer gap), ${verdicts} verdict changes`,
);
await health.close();
await store.close();
