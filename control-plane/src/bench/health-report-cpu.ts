import {
  create,
  NodeHealthReportSchema,
  NodeHealthSchema,
  ReceivedHealthReport,
  receiveRequest,
  StreamSnapshotsRequestSchema,
  toBinary,
} from "@clawgate/proto";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { decodedReport, HealthIntake } from "../grpc/health-intake.js";
import { FleetHealth } from "../health/fleet-health.js";
import { SharedHealthReports } from "../health/shared-health-reports.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import { evictedNodes } from "../testing/evicted-nodes.js";

/**
 * The control plane's CPU per node-health report of one data plane that watches `nodes` nodes,
 * of which `changed` change state between two reports (issue 9: a steady trickle of evictions):
 * a whole view each time, against a changes-only report. Each report is taken in as the stream
 * does (scan, then in budgeted slices: decode, bounds check, FleetHealth: diff, journal,
 * tallies), alone and shared through the
 * store (SharedHealthReports on the embedded store, as replicas share on etcd). CPU is the
 * process's user plus system time (libuv's pool included), from the first report until the view
 * shows the last one. Measures and prints; asserts nothing.
 *
 *   node control-plane/dist/bench/health-report-cpu.js [nodes] [changed] [reports]
 */
const nodeCount = Number(process.argv[2] ?? 20_000);
const changed = Number(process.argv[3] ?? 5);
const reports = Number(process.argv[4] ?? 20);

const start = evictedNodes(nodeCount).map((node) => ({ ...node, state: "healthy" }));

/** The nodes report `round` changes: `changed` of them, spread over the view, flip state. */
function changesOf(round: number): ReportedNodeHealth[] {
  return Array.from({ length: changed }, (_, k) => {
    const node = start[(round * 7919 + k * 104_729) % nodeCount]!;
    return { ...node, state: round % 2 === 1 ? "evicted" : "healthy", changedAtMs: BigInt(round) };
  });
}

function message(nodes: readonly ReportedNodeHealth[]) {
  return nodes.map((node) =>
    create(NodeHealthSchema, { ...node, changedAtMs: BigInt(node.changedAtMs) }),
  );
}

// Every report's bytes, encoded before anything is measured.
const wholeBytes: Buffer[] = [];
const changesBytes: Buffer[] = [];
const view = new Map(start.map((node) => [`${node.upstream} ${node.address}`, node]));
for (let round = 1; round <= reports; round++) {
  const changes = changesOf(round);
  for (const node of changes) view.set(`${node.upstream} ${node.address}`, node);
  const whole = create(NodeHealthReportSchema, { nodes: message([...view.values()]) });
  const only = create(NodeHealthReportSchema, { changesOnly: true, nodes: message(changes) });
  for (const [report, out] of [
    [whole, wholeBytes],
    [only, changesBytes],
  ] as const) {
    const request = create(StreamSnapshotsRequestSchema, {
      message: { case: "health", value: report },
    });
    out.push(Buffer.from(toBinary(StreamSnapshotsRequestSchema, request)));
  }
}
const first = Buffer.from(
  toBinary(
    StreamSnapshotsRequestSchema,
    create(StreamSnapshotsRequestSchema, {
      message: { case: "health", value: { nodes: message(start) } },
    }),
  ),
);

/** A stream's intake of one data plane's reports, handing them to `health` as the fleet does. */
function streamIntake(health: FleetHealth): HealthIntake {
  return new HealthIntake({
    fleet: {
      healthReported: (nodeId, _stream, nodes) => health.report(nodeId, nodes),
      // Waits as the fleet's listener does: one data plane here, so its work is all there is.
      healthChangesReported: (nodeId, _stream, changes) =>
        health.reportChanges(nodeId, changes) ? health.settled() : undefined,
    },
    nodeId: "dp-1",
    stream: 1,
    refuse: (reason) => {
      throw new Error(reason);
    },
  });
}

/** Takes a report's bytes in as the stream session does. */
function intake(stream: HealthIntake, bytes: Buffer): void {
  const request = receiveRequest(bytes);
  if (request instanceof ReceivedHealthReport) stream.take(request);
  else if (request.message.case === "health") stream.take(decodedReport(request.message.value));
  else throw new Error("not a health report");
}

/** Resolves once the view shows the last report's changes. */
function settled(health: FleetHealth): Promise<void> {
  const last = changesOf(reports)[0]!;
  const done = () => health.node(last.upstream, last.address)?.reports[0]?.state === last.state;
  return new Promise((resolve) => {
    if (done()) return resolve();
    const off = health.onUpdate(() => {
      if (!done()) return;
      off();
      resolve();
    });
  });
}

async function measure(kind: "whole" | "changes-only", shared: boolean, print = true) {
  const store = shared ? await openEmbeddedStore({}) : undefined;
  const health = new FleetHealth(
    store && {
      shared: new SharedHealthReports({ store, prefix: "/bench/", replicaId: "cp-1" }),
    },
  );
  await health.start();
  const stream = streamIntake(health);
  // The whole view after Hello, not measured: both kinds start from it.
  intake(stream, first);
  await stream.idle();
  await health.settled();
  await new Promise((resolve) => setTimeout(resolve, 200));
  const bytes = kind === "whole" ? wholeBytes : changesBytes;
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (const report of bytes) {
    intake(stream, report);
    // Reports from a stream arrive in turns of their own.
    await new Promise((resolve) => setImmediate(resolve));
  }
  await stream.idle();
  await health.settled();
  const intakeCpu = process.cpuUsage(cpu);
  await settled(health);
  const total = process.cpuUsage(cpu);
  const ms = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1_000 / reports;
  if (print)
    console.log(
      `${kind.padEnd(12)} ${shared ? "shared" : "alone "}: ${(bytes[0]!.length / 1024).toFixed(1)} KiB a report; ` +
        `CPU ${ms(intakeCpu).toFixed(2)} ms a report taken in, ${ms(total).toFixed(2)} ms with the store writes ` +
        `(${(performance.now() - started).toFixed(0)} ms until the view showed the last one)`,
    );
  await health.close();
  await store?.close();
}

console.log(
  `${reports} reports of a data plane watching ${nodeCount} nodes, ${changed} changing between two`,
);
// A warm-up pass (JIT) first, not printed.
for (const print of [false, true]) {
  for (const kind of ["whole", "changes-only"] as const) {
    for (const shared of [false, true]) await measure(kind, shared, print);
  }
}
