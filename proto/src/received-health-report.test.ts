import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import {
  type NodeHealth,
  NodeHealthSchema,
  StreamSnapshotsRequestSchema,
} from "./gen/clawgate/v1/snapshot_service_pb.js";
import { ReceivedHealthReport, receiveRequest } from "./received-health-report.js";
import { changesOnlyRequest, healthOf, requestBytes } from "./testing/health-request.js";

/** Every node of `report`, read `max` at a time. */
function readAll(report: ReceivedHealthReport, max: number): NodeHealth[] {
  const nodes: NodeHealth[] = [];
  for (let slice = report.nextNodes(max); slice.length > 0; slice = report.nextNodes(max)) {
    expect(slice.length).toBeLessThanOrEqual(max);
    nodes.push(...slice);
  }
  return nodes;
}

function generic(bytes: Uint8Array) {
  const decoded = fromBinary(StreamSnapshotsRequestSchema, bytes);
  if (decoded.message.case !== "health") throw new Error("not a health report");
  return decoded.message.value;
}

describe("receiveRequest", () => {
  it("reads a health report's nodes slice by slice as fromBinary decodes them whole", () => {
    const cases = [
      requestBytes({ case: "health", value: { nodes: [] } }),
      requestBytes({
        case: "health",
        value: {
          nodes: Array.from({ length: 7 }, (_, i) =>
            healthOf(
              `10.0.0.${i}:80`,
              i % 2 ? "evicted" : "healthy",
              "refused é ✓",
              BigInt(i) << 40n,
            ),
          ),
        },
      }),
      changesOnlyRequest(),
    ];
    for (const bytes of cases) {
      const received = receiveRequest(bytes);
      expect(received).toBeInstanceOf(ReceivedHealthReport);
      const report = received as ReceivedHealthReport;
      const whole = generic(bytes);
      expect([report.changesOnly, report.nodeCount]).toEqual([
        whole.changesOnly,
        whole.nodes.length,
      ]);
      expect(report.removed).toEqual(whole.removed);
      expect(readAll(report, 2)).toEqual(whole.nodes);
    }
  });

  it("decodes every other message whole", () => {
    const hello = requestBytes({ case: "hello", value: { nodeId: "dp-1", protocolVersion: 1 } });
    expect(receiveRequest(hello)).toEqual(fromBinary(StreamSnapshotsRequestSchema, hello));
  });

  it("keeps a node field it does not know, from the node that has it on (a newer data plane)", () => {
    const known = toBinary(NodeHealthSchema, healthOf("10.0.0.1:80", "healthy"));
    const newer = new BinaryWriter()
      .tag(2, WireType.LengthDelimited)
      .string("10.0.0.2:80")
      .tag(9, WireType.Varint)
      .uint32(1)
      .finish();
    const report = new BinaryWriter()
      .tag(1, WireType.LengthDelimited)
      .bytes(known)
      .tag(1, WireType.LengthDelimited)
      .bytes(newer)
      .finish();
    const bytes = new BinaryWriter().tag(4, WireType.LengthDelimited).bytes(report).finish();
    const received = receiveRequest(bytes) as ReceivedHealthReport;
    const nodes = readAll(received, 1);
    expect(nodes).toEqual(generic(bytes).nodes);
    expect(nodes[1]?.$unknown).toHaveLength(1);
  });

  it("decodes whole a report with a top-level field it does not know", () => {
    const report = new BinaryWriter()
      .tag(1, WireType.LengthDelimited)
      .bytes(toBinary(NodeHealthSchema, healthOf("10.0.0.1:80", "healthy")))
      .tag(7, WireType.Varint)
      .uint32(1)
      .finish();
    const bytes = new BinaryWriter().tag(4, WireType.LengthDelimited).bytes(report).finish();
    expect(receiveRequest(bytes)).toEqual(fromBinary(StreamSnapshotsRequestSchema, bytes));
  });

  it("refuses bytes cut short when it scans them", () => {
    const truncated = requestBytes({
      case: "health",
      value: { nodes: [healthOf("10.0.0.1:80", "healthy")] },
    }).slice(0, -3);
    expect(() => receiveRequest(truncated)).toThrow();
  });
});
