import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  BinaryWriter,
  create,
  NodeHealthReportSchema,
  ReceivedHealthReport,
  receiveRequest,
  StreamSnapshotsRequestSchema,
  toBinary,
  WireType,
} from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { Fleet, type ReportedNodeHealth } from "../fleet/fleet.js";
import { FleetHealth } from "../health/fleet-health.js";
import { evictedNodes } from "../testing/evicted-nodes.js";
import { recordingJournal } from "../testing/recording-journal.js";
import { INTAKE_ENTRIES_PER_TURN } from "../turns/turn-budget.js";
import { HealthIntake, MAX_BACKLOG_BYTES } from "./health-intake.js";

const NODES = 20_000;
const hello = { hostname: "dp-1.local", softwareVersion: "1.0.0", lastAppliedVersion: 0 };

/** A report as it comes off the wire, scanned by the server's deserializer. */
function received(report: MessageInitShape<typeof NodeHealthReportSchema>): ReceivedHealthReport {
  const bytes = toBinary(
    StreamSnapshotsRequestSchema,
    create(StreamSnapshotsRequestSchema, {
      message: { case: "health", value: create(NodeHealthReportSchema, report) },
    }),
  );
  const request = receiveRequest(bytes);
  if (!(request instanceof ReceivedHealthReport)) throw new Error("not read in slices");
  return request;
}

/** Nodes as the wire has them (changedAtMs a uint64). */
function wire(nodes: readonly ReportedNodeHealth[]) {
  return nodes.map((node) => ({ ...node, changedAtMs: BigInt(node.changedAtMs) }));
}

/** Counts event-loop turns (check phases) until stopped. */
function turnCounter() {
  const counter = { turns: 0, stopped: false };
  const tick = () => {
    counter.turns++;
    if (!counter.stopped) setImmediate(tick);
  };
  setImmediate(tick);
  return counter;
}

function harness(onBacklog?: (full: boolean) => void, fleet = new Fleet()) {
  const { journal, recorded } = recordingJournal();
  const health = new FleetHealth({ fleet, journal });
  const stream = fleet.connected("dp-1", hello);
  const refused: string[] = [];
  const intake = new HealthIntake({
    fleet,
    nodeId: "dp-1",
    stream,
    refuse: (reason, undecodable) =>
      refused.push(`${undecodable ? "undecodable" : "bounds"}: ${reason}`),
    ...(onBacklog === undefined ? {} : { onBacklog }),
  });
  const settled = async () => {
    await intake.idle();
    await health.settled();
  };
  return { fleet, health, intake, recorded, refused, settled };
}

describe("HealthIntake", () => {
  it("takes a whole 20,000-node report in over many short turns; a change arriving meanwhile runs before it ends", async () => {
    const { health, intake, refused, settled } = harness();
    const nodes = evictedNodes(NODES);
    const counter = turnCounter();
    let inViewAt: number | undefined;
    health.onUpdate(() => {
      inViewAt = counter.turns;
    });

    intake.take(received({ nodes: wire(nodes) }));
    // What a config change's watch event stands for: work that arrives after the report.
    let changeRanAt: number | undefined;
    setTimeout(() => {
      changeRanAt = counter.turns;
    }, 0);
    expect(inViewAt).toBeUndefined();
    await settled();
    counter.stopped = true;

    expect(refused).toEqual([]);
    expect(health.nodesWhere("evicted")).toHaveLength(NODES);
    expect(changeRanAt).toBeDefined();
    expect(changeRanAt).toBeLessThan(inViewAt as number);
    // Decoded, parsed against the previous view, journaled, tallied: each pass over 20,000
    // entries at most INTAKE_ENTRIES_PER_TURN a turn.
    expect(inViewAt).toBeGreaterThanOrEqual((3 * NODES) / INTAKE_ENTRIES_PER_TURN);
  });

  it("applies a changes-only report sent right after a whole one on that whole one, in order", async () => {
    const { health, intake, recorded, settled } = harness();
    const nodes = evictedNodes(NODES);
    const back: ReportedNodeHealth = { ...nodes[7]!, state: "healthy", changedAtMs: 1n << 42n };
    intake.take(received({ nodes: wire(nodes) }));
    intake.take(received({ changesOnly: true, nodes: wire([back]), removed: wire([nodes[9]!]) }));
    await settled();

    expect(health.node(back.upstream, back.address)?.majority).toBe("healthy");
    expect(health.node(nodes[9]!.upstream, nodes[9]!.address)).toBeUndefined();
    expect(health.nodesWhere("evicted")).toHaveLength(NODES - 2);
    expect(recorded.filter((e) => e.node === back.address).map((e) => e.action)).toEqual([
      "evict",
      "readmit",
    ]);
  });

  it("says its backlog is full once whole 20,000-node reports of MAX_BACKLOG_BYTES wait, and when it is not any more", async () => {
    const calls: boolean[] = [];
    const { health, intake, settled } = harness((full) => calls.push(full));
    const nodes = evictedNodes(NODES);
    const reportBytes = received({ nodes: wire(nodes) }).byteLength;
    let taken = 0;
    while (calls.length === 0) {
      intake.take(received({ nodes: wire(nodes) }));
      taken++;
    }
    // The stream stops reading here; nothing more arrives until the backlog drains.
    expect(calls).toEqual([true]);
    expect(taken).toBe(Math.ceil(MAX_BACKLOG_BYTES / reportBytes));
    await settled();
    expect(calls).toEqual([true, false]);
    expect(health.nodesWhere("evicted")).toHaveLength(nodes.length);
  });

  it("keeps reading while many small changes-only reports wait behind a whole one", async () => {
    const calls: boolean[] = [];
    const { health, intake, recorded, settled } = harness((full) => calls.push(full));
    const nodes = evictedNodes(NODES);
    intake.take(received({ nodes: wire(nodes) }));
    // A node flapping while the whole report is taken in: each change is a report of its own.
    const flaps = 200;
    for (let i = 0; i < flaps; i++) {
      const state = i % 2 === 0 ? "healthy" : "evicted";
      const changed = { ...nodes[3]!, state, changedAtMs: 1n << 42n };
      intake.take(received({ changesOnly: true, nodes: wire([changed]) }));
    }
    expect(calls).toEqual([]);
    await settled();
    expect(calls).toEqual([]);
    expect(health.nodesWhere("evicted")).toHaveLength(NODES);
    // Every change taken in, in order: evicted by the whole report, then each flap.
    expect(recorded.filter((e) => e.node === nodes[3]!.address)).toHaveLength(flaps + 1);
  });

  it("counts a report in its backlog until FleetHealth has taken it in, so its queue there stays bounded across a reconnect", async () => {
    const fleet = new Fleet();
    const { health, intake: old, settled } = harness(undefined, fleet);
    // Each report changes every node, so taking it into the view costs more than decoding it.
    const count = 5_000;
    const evicted = wire(evictedNodes(count));
    const healthy = wire(evictedNodes(count).map((n) => ({ ...n, state: "healthy" })));
    const counter = turnCounter();
    let most = 0;
    const sample = () => {
      most = Math.max(most, health.queued("dp-1"));
      if (!counter.stopped) setImmediate(sample);
    };
    sample();
    for (let i = 0; i < 6; i++) old.take(received({ nodes: i % 2 === 0 ? evicted : healthy }));
    // dp-1 reconnects while the old stream's reports are queued, and sends its view again.
    const stream = fleet.connected("dp-1", hello);
    const fresh = new HealthIntake({ fleet, nodeId: "dp-1", stream, refuse: () => {} });
    for (let i = 0; i < 6; i++) fresh.take(received({ nodes: i % 2 === 0 ? healthy : evicted }));
    await settled();
    await fresh.idle();
    await health.settled();
    counter.stopped = true;

    // One report of each stream at most: the old stream's later ones are dropped at the hand-over.
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(2);
    expect(health.nodesWhere("evicted")).toHaveLength(count);
  });

  it("hands nothing more to the fleet once its stream is over", async () => {
    const { health, intake, settled } = harness();
    intake.take(received({ nodes: wire(evictedNodes(NODES)) }));
    intake.close();
    await settled();
    expect(health.nodesWhere("evicted")).toEqual([]);
  });

  it("ends the stream over a node out of bounds, naming it with its index in the report", async () => {
    const { health, intake, refused, settled } = harness();
    const nodes = evictedNodes(600);
    nodes[555] = { ...nodes[555]!, state: "x".repeat(1_000) };
    intake.take(received({ nodes: wire(nodes) }));
    await settled();
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatch(/^bounds: NodeHealthReport\.nodes\[555\]\.state /);
    expect(health.nodesWhere("evicted")).toEqual([]);
  });
});

describe("HealthIntake, bytes that are no report", () => {
  it("ends the stream when a node's bytes cannot be decoded, saying so", async () => {
    const { health, intake, refused, settled } = harness();
    // A node whose only field has wire type 7, which no protobuf decoder reads.
    const bad = new BinaryWriter()
      .tag(1, WireType.LengthDelimited)
      .bytes(new Uint8Array([0x0f]))
      .finish();
    const bytes = new BinaryWriter().tag(4, WireType.LengthDelimited).bytes(bad).finish();
    const request = receiveRequest(bytes);
    expect(request).toBeInstanceOf(ReceivedHealthReport);
    intake.take(request as ReceivedHealthReport);
    await settled();
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatch(/^undecodable: NodeHealthReport could not be decoded: /);
    expect(health.nodesWhere("evicted")).toEqual([]);
  });
});
