import { fromBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { StreamSnapshotsRequestSchema } from "./gen/clawgate/v1/snapshot_service_pb.js";
import { decodeRequest } from "./health-report-decode.js";
import { changesOnlyRequest, healthOf, requestBytes } from "./testing/health-request.js";

describe("decodeRequest", () => {
  it("gives what fromBinary gives for whole and changes-only health reports", () => {
    const cases = [
      requestBytes({ case: "health", value: { nodes: [] } }),
      requestBytes({
        case: "health",
        value: {
          nodes: [
            healthOf("10.0.0.1:80", "healthy"),
            healthOf("10.0.0.2:80", "evicted", "error ECONNREFUSED: é ✓", 1_796_133_542_081n),
            healthOf("[::1]:80", "quarantined", "", 2n ** 63n),
          ],
        },
      }),
      changesOnlyRequest(),
      requestBytes({ case: "health", value: { changesOnly: true } }),
    ];
    for (const bytes of cases) {
      expect(decodeRequest(bytes)).toEqual(fromBinary(StreamSnapshotsRequestSchema, bytes));
    }
  });

  it("leaves every other message to the generic decoder", () => {
    const hello = requestBytes({
      case: "hello",
      value: { nodeId: "dp-1", protocolVersion: 1, acceptsDeltas: true },
    });
    const ack = requestBytes({ case: "ack", value: { version: 7n, nonce: "n" } });
    for (const bytes of [hello, ack]) {
      expect(decodeRequest(bytes)).toEqual(fromBinary(StreamSnapshotsRequestSchema, bytes));
    }
  });

  it("keeps a field it does not know, as fromBinary does (a newer data plane's report)", () => {
    // NodeHealth with an unknown field 9 inside a health report.
    const inner = new BinaryWriter()
      .tag(2, WireType.LengthDelimited)
      .string("10.0.0.1:80")
      .tag(9, WireType.Varint)
      .uint32(1)
      .finish();
    const report = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(inner).finish();
    const bytes = new BinaryWriter().tag(4, WireType.LengthDelimited).bytes(report).finish();
    const decoded = decodeRequest(bytes);
    expect(decoded).toEqual(fromBinary(StreamSnapshotsRequestSchema, bytes));
    const health = decoded.message.case === "health" ? decoded.message.value : undefined;
    expect(health?.nodes[0]?.$unknown).toHaveLength(1);
  });

  it("refuses bytes that are no message, as fromBinary does", () => {
    const truncated = requestBytes({
      case: "health",
      value: { nodes: [healthOf("10.0.0.1:80", "healthy")] },
    }).slice(0, -3);
    expect(() => decodeRequest(truncated)).toThrow();
  });
});
