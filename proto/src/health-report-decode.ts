import { fromBinary } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import {
  type NodeHealth,
  type NodeHealthReport,
  type StreamSnapshotsRequest,
  StreamSnapshotsRequestSchema,
} from "./gen/clawgate/v1/snapshot_service_pb.js";

/** StreamSnapshotsRequest field 4 (health), length-delimited: the one message read here. */
export const HEALTH_TAG = (4 << 3) | WireType.LengthDelimited;

/** A field this reader does not know: the generic decoder keeps it (in `$unknown`). */
export class UnknownField extends Error {}

/**
 * Decodes a StreamSnapshotsRequest, reading a node-health report field by field instead of
 * through protobuf-es's reflection. A control plane takes in every data plane's first report of
 * 20,000 nodes right after they boot; decoding them was a third of its CPU then (about 200 ms a
 * report), and the config changes of that second waited behind it. Anything else, and a report
 * with a field this reader does not know (a newer data plane), goes to fromBinary, so the result
 * is always the message fromBinary gives (the test compares the two).
 */
export function decodeRequest(bytes: Uint8Array): StreamSnapshotsRequest {
  if (bytes[0] === HEALTH_TAG) {
    try {
      const reader = new BinaryReader(bytes);
      reader.tag();
      const report = readReport(reader, reader.uint32());
      if (reader.pos === reader.len) {
        return {
          $typeName: "clawgate.v1.StreamSnapshotsRequest",
          message: { case: "health", value: report },
        };
      }
    } catch (error) {
      if (!(error instanceof UnknownField)) throw error;
    }
  }
  return fromBinary(StreamSnapshotsRequestSchema, bytes);
}

function readReport(reader: BinaryReader, length: number): NodeHealthReport {
  const end = reader.pos + length;
  const report: NodeHealthReport = {
    $typeName: "clawgate.v1.NodeHealthReport",
    nodes: [],
    changesOnly: false,
    removed: [],
  };
  while (reader.pos < end) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === WireType.LengthDelimited) {
      report.nodes.push(readNode(reader, reader.uint32()));
    } else if (field === 2 && wireType === WireType.Varint) {
      report.changesOnly = reader.bool();
    } else if (field === 3 && wireType === WireType.LengthDelimited) {
      report.removed.push(readNode(reader, reader.uint32()));
    } else {
      throw new UnknownField();
    }
  }
  return report;
}

/** One NodeHealth of `length` bytes at the reader's position; UnknownField on a field it does not know. */
export function readNode(reader: BinaryReader, length: number): NodeHealth {
  const end = reader.pos + length;
  const node: NodeHealth = {
    $typeName: "clawgate.v1.NodeHealth",
    upstream: "",
    address: "",
    state: "",
    evidence: "",
    changedAtMs: 0n,
  };
  while (reader.pos < end) {
    const [field, wireType] = reader.tag();
    if (wireType === WireType.LengthDelimited && field >= 1 && field <= 4) {
      const text = reader.string();
      if (field === 1) node.upstream = text;
      else if (field === 2) node.address = text;
      else if (field === 3) node.state = text;
      else node.evidence = text;
    } else if (field === 5 && wireType === WireType.Varint) {
      node.changedAtMs = BigInt(reader.uint64());
    } else {
      throw new UnknownField();
    }
  }
  return node;
}
