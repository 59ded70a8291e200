import {
  create,
  HelloSchema,
  NodeHealthReportSchema,
  PROTOCOL_VERSION,
  StreamSnapshotsRequestSchema,
  snapshotServiceDefinition,
  toBinary,
} from "@clawgate/proto";
import * as grpc from "@grpc/grpc-js";
import { pino } from "pino";
import { Fleet } from "../fleet/fleet.js";
import { startSnapshotServer } from "../grpc/snapshot-server.js";
import { FleetHealth } from "../health/fleet-health.js";
import { SharedHealthReports } from "../health/shared-health-reports.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import { evictedNodes } from "../testing/evicted-nodes.js";
import { FakeSnapshotPublisher } from "../testing/fake-snapshot-publisher.js";
import { watchLongestGap } from "./longest-gap.js";

/**
 * What a fleet's first node-health reports do to config changes in the control plane (issue
 * 9): the real snapshot server, FleetHealth and SharedHealthReports (on the embedded store, so
 * the figures are the control plane's own work), `dataPlanes` gRPC streams in this process
 * that each send a whole report of `nodes` nodes at once (encoded before anything is timed),
 * while a config change is published every 20 ms. Prints the longest event-loop turn while the
 * reports are taken in (a 1 ms timer's longest gap), how long until the view holds them all, and
 * each change's latency from when it was due to its delta's arrival on a stream that sends no
 * reports.
 * Measures and prints; asserts nothing.
 *
 *   node control-plane/dist/bench/health-intake-turns.js [dataPlanes] [nodes]
 */
const dataPlanes = Number(process.argv[2] ?? 10);
const nodeCount = Number(process.argv[3] ?? 20_000);
const CHANGE_EVERY_MS = 20;
const method = snapshotServiceDefinition.streamSnapshots;

const nodes = evictedNodes(nodeCount).map((node) => ({
  ...node,
  changedAtMs: BigInt(node.changedAtMs),
}));
const reportBytes = Buffer.from(
  toBinary(
    StreamSnapshotsRequestSchema,
    create(StreamSnapshotsRequestSchema, {
      message: { case: "health", value: create(NodeHealthReportSchema, { nodes }) },
    }),
  ),
);

const store = await openEmbeddedStore({});
const fleet = new Fleet();
const health = new FleetHealth({
  fleet,
  shared: new SharedHealthReports({ store, prefix: "/bench/", replicaId: "cp-1" }),
});
await health.start();
const publisher = new FakeSnapshotPublisher("cp", 10);
publisher.publish({ put: [{ name: "u-0" }] });
const server = await startSnapshotServer({
  address: "127.0.0.1:0",
  builder: publisher,
  fleet,
  logger: pino({ level: "silent" }),
});
const clients: grpc.Client[] = [];

/** A stream that says Hello and resolves each version it receives to when it arrived. */
function openStream(nodeId: string, onVersion: (version: bigint) => void) {
  // A connection each, as each data plane has: the server allows 4 streams per connection.
  const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
  });
  clients.push(client);

  const call = client.makeBidiStreamRequest(
    method.path,
    // Bytes pass as they are: copying a 3.5 MB report here would be the bench's own long turn.
    (bytes: Uint8Array) => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes)),
    method.responseDeserialize,
  );
  call.on("error", () => undefined);
  call.on("data", (response: ReturnType<typeof method.responseDeserialize>) => {
    const message = response.message;
    if (message.case === "snapshot" || message.case === "delta") {
      onVersion(message.value.version);
      call.write(
        toBinary(
          StreamSnapshotsRequestSchema,
          create(StreamSnapshotsRequestSchema, {
            message: {
              case: "ack",
              value: { version: message.value.version, nonce: message.value.nonce },
            },
          }),
        ),
      );
    }
  });
  call.write(
    toBinary(
      StreamSnapshotsRequestSchema,
      create(StreamSnapshotsRequestSchema, {
        message: {
          case: "hello",
          value: create(HelloSchema, {
            nodeId,
            protocolVersion: PROTOCOL_VERSION,
            acceptsDeltas: true,
          }),
        },
      }),
    ),
  );
  return call;
}

const arrivals = new Map<bigint, number>();
let witnessReady: () => void = () => {};
const witnessSynced = new Promise<void>((resolve) => {
  witnessReady = resolve;
});
const witness = openStream("witness", (version) => {
  if (!arrivals.has(version)) arrivals.set(version, performance.now());
  witnessReady();
});
let synced = 0;
let allSynced: () => void = () => {};
const reporting = new Promise<void>((resolve) => {
  allSynced = resolve;
});
const reporters = Array.from({ length: dataPlanes }, (_, i) =>
  openStream(`dp-${i}`, () => {
    if (++synced === dataPlanes) allSynced();
  }),
);
await Promise.all([witnessSynced, reporting]);

// Every report's last node in the view, from every data plane: the intake is over.
const last = nodes[nodes.length - 1]!;
const inView = new Promise<void>((resolve) => {
  const off = health.onUpdate(() => {
    if (health.node(last.upstream, last.address)?.total !== dataPlanes) return;
    off();
    resolve();
  });
});
const gap = watchLongestGap();
const started = performance.now();
const published = new Map<bigint, number>();
let change = 0;
// A change is due CHANGE_EVERY_MS after the one before: a timer held back by a long turn
// counts from when it was due, as a watch event that waits in the socket would.
let due = started + CHANGE_EVERY_MS;
const changes = setInterval(() => {
  const { version } = publisher.publish({ put: [{ name: `u-${++change % 5}` }] });
  published.set(BigInt(version), due);
  due = performance.now() + CHANGE_EVERY_MS;
}, CHANGE_EVERY_MS);
// One report a turn, as they come from separate data planes; grpc-js still copies each into
// its frame here, a few milliseconds of this process's turns that are the bench's, not the
// control plane's.
for (const call of reporters) {
  call.write(reportBytes);
  await new Promise((resolve) => setImmediate(resolve));
}
await inView;
const intakeMs = performance.now() - started;
clearInterval(changes);
const longest = gap.stop();
// Let the last change arrive.
await new Promise((resolve) => setTimeout(resolve, 200));
const latencies = [...published]
  .map(([version, at]) => (arrivals.get(version) ?? Number.NaN) - at)
  .filter((ms) => !Number.isNaN(ms));
const sorted = [...latencies].sort((a, b) => a - b);
const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
console.log(
  `${dataPlanes} whole reports of ${nodeCount} nodes at once: in the view after ${intakeMs.toFixed(0)} ms; ` +
    `longest turn ${longest.toFixed(1)} ms; ${latencies.length} changes meanwhile, due to delta on a stream ` +
    `p50 ${at(0.5).toFixed(1)} ms, p99 ${at(0.99).toFixed(1)} ms, max ${Math.max(...latencies).toFixed(1)} ms`,
);
for (const call of [witness, ...reporters]) call.end();
for (const client of clients) client.close();
await server.close(100);
await health.close();
await store.close();
