import { fromBinary } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import {
  type NodeHealth,
  type StreamSnapshotsRequest,
  StreamSnapshotsRequestSchema,
} from "./gen/clawgate/v1/snapshot_service_pb.js";
import { decodeRequest, HEALTH_TAG, readNode, UnknownField } from "./health-report-decode.js";

/**
 * A node-health report as the control plane receives it: its bytes, scanned but not decoded,
 * so its nodes can be decoded a slice at a time (nextNodes) by a caller that yields to the event
 * loop between slices. A data plane's first report holds every node it routes to (20,000 at
 * issue 9's scale): decoded in the gRPC deserializer, ten of them after a fleet boots held the
 * control plane for hundreds of milliseconds each, and the config changes of those seconds
 * waited behind them.
 */
export class ReceivedHealthReport {
  /** True for a changes-only report (NodeHealthReport.changes_only). */
  readonly changesOnly: boolean;
  /** Entries of NodeHealthReport.nodes. */
  readonly nodeCount: number;
  /** NodeHealthReport.removed, decoded when the report was scanned (a short list in practice). */
  readonly removed: readonly NodeHealth[];
  readonly #bytes: Uint8Array;
  /** The report's bytes on the wire (its fields, within the message). */
  readonly byteLength: number;
  /** Where the report's fields end in #bytes. */
  readonly #end: number;
  /** Where the next top-level field not yet read starts. */
  #cursor: number;
  /** Nodes handed out so far. */
  #read = 0;
  /** The nodes decoded by fromBinary, once a node had a field this reader does not know. */
  #decoded: readonly NodeHealth[] | undefined;

  /** Use receiveRequest: it scans the report and falls back to a whole decode where it must. */
  constructor(scan: ReportScan) {
    this.changesOnly = scan.changesOnly;
    this.nodeCount = scan.nodeCount;
    this.removed = scan.removed;
    this.#bytes = scan.bytes;
    this.#cursor = scan.start;
    this.#end = scan.end;
    this.byteLength = scan.end - scan.start;
  }

  /** The next at most `max` nodes, in the order sent; an empty list once every node was read. */
  nextNodes(max: number): NodeHealth[] {
    const out: NodeHealth[] = [];
    if (this.#decoded === undefined) {
      const reader = new BinaryReader(this.#bytes);
      reader.pos = this.#cursor;
      try {
        while (out.length < max && reader.pos < this.#end) {
          const [field, wireType] = reader.tag();
          if (field === 1 && wireType === WireType.LengthDelimited) {
            out.push(readNode(reader, reader.uint32()));
          } else if (wireType === WireType.LengthDelimited) {
            // removed was taken in by the scan.
            skipBytes(reader);
          } else {
            // changes_only was taken in by the scan.
            reader.skip(wireType, field);
          }
          this.#cursor = reader.pos;
        }
        this.#read += out.length;
        return out;
      } catch (error) {
        if (!(error instanceof UnknownField)) throw error;
        // A newer data plane's node field: the generic decoder keeps it; this slice restarts there.
        const request = fromBinary(StreamSnapshotsRequestSchema, this.#bytes);
        this.#decoded = request.message.case === "health" ? request.message.value.nodes : [];
      }
    }
    const slice = this.#decoded.slice(this.#read, this.#read + max);
    this.#read += slice.length;
    return slice;
  }
}

/** What a scan of a report's top-level fields found. */
interface ReportScan {
  bytes: Uint8Array;
  start: number;
  end: number;
  changesOnly: boolean;
  nodeCount: number;
  removed: NodeHealth[];
}

/** A message as the control plane's stream receives it: decoded, or a health report to read. */
export type ReceivedRequest = StreamSnapshotsRequest | ReceivedHealthReport;

/**
 * The control plane's requestDeserialize: a node-health report is only scanned (its fields
 * walked by their lengths, a fraction of a decode) and read later in slices; anything else, and
 * a report this reader cannot scan (a top-level field it does not know), is decoded whole as
 * decodeRequest does, so nothing a newer data plane sends is lost.
 */
export function receiveRequest(bytes: Uint8Array): ReceivedRequest {
  if (bytes[0] !== HEALTH_TAG) return decodeRequest(bytes);
  const scan = scanReport(bytes);
  return scan === undefined ? decodeRequest(bytes) : new ReceivedHealthReport(scan);
}

/**
 * Moves past a length-delimited field's bytes. BinaryReader.skip does too, but makes a view of
 * them each time: 20,000 of those made the scan cost about what the decode did.
 */
function skipBytes(reader: BinaryReader): void {
  const length = reader.uint32();
  reader.pos += length;
  if (reader.pos > reader.len) throw new RangeError("premature EOF");
}

function scanReport(bytes: Uint8Array): ReportScan | undefined {
  try {
    const reader = new BinaryReader(bytes);
    reader.tag();
    const length = reader.uint32();
    const start = reader.pos;
    const end = start + length;
    // Another field after the report: a whole decode says what the message is.
    if (end !== reader.len) return undefined;
    const scan: ReportScan = {
      bytes,
      start,
      end,
      changesOnly: false,
      nodeCount: 0,
      removed: [],
    };
    while (reader.pos < end) {
      const [field, wireType] = reader.tag();
      if (field === 1 && wireType === WireType.LengthDelimited) {
        skipBytes(reader);
        scan.nodeCount++;
      } else if (field === 2 && wireType === WireType.Varint) {
        scan.changesOnly = reader.bool();
      } else if (field === 3 && wireType === WireType.LengthDelimited) {
        scan.removed.push(readNode(reader, reader.uint32()));
      } else {
        return undefined;
      }
    }
    return reader.pos === end ? scan : undefined;
  } catch (error) {
    if (error instanceof UnknownField) return undefined;
    throw error;
  }
}
