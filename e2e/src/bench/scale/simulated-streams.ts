import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import {
  create,
  PROTOCOL_VERSION,
  type StreamSnapshotsRequest,
  StreamSnapshotsRequestSchema,
  snapshotServiceDefinition,
} from "@clawgate/proto";
import * as grpc from "@grpc/grpc-js";

/** What one simulated data plane saw arrive: a snapshot's version and when it was complete. */
export interface Arrival {
  stream: number;
  version: number;
  /** Whole (in however many parts) or a delta. */
  kind: "full" | "delta";
  /** Bytes of every message that carried it. */
  bytes: number;
  atMs: number;
}

/** The fields of a message a simulated data plane reads; the rest it skips. */
interface Head {
  kind: "full" | "delta";
  version: number;
  nonce: string;
  /** 0 or 1: the message is the whole snapshot. */
  parts: number;
}

/**
 * Many data-plane streams in this one process, each on its own connection: they say Hello
 * (taking deltas), read only the version, nonce and part count of each snapshot or delta
 * (never decoding or compiling the rest, so a few hundred fit in one process) and Ack it once
 * all its parts arrived, which is all the control plane can tell apart from a real data plane.
 */
export class SimulatedStreams {
  readonly #clients: grpc.Client[] = [];
  readonly #calls: grpc.ClientDuplexStream<StreamSnapshotsRequest, Buffer>[] = [];
  readonly #listeners = new Set<(arrival: Arrival) => void>();

  /**
   * Opens `count` streams to `address`. `lastAppliedVersion` in each Hello: the published
   * version to be sent only later changes, 0 to be sent the full snapshot at once. Node ids
   * are `${namePrefix}-${i}`.
   */
  constructor(
    address: string,
    count: number,
    lastAppliedVersion: number,
    namePrefix = "simulated",
  ) {
    const method = snapshotServiceDefinition.streamSnapshots;
    for (let i = 0; i < count; i++) {
      const client = new grpc.Client(address, grpc.credentials.createInsecure(), {
        // A connection per stream, as separate data planes would have.
        "grpc.use_local_subchannel_pool": 1,
        "grpc.max_receive_message_length": 256 * 1024 * 1024,
      });
      const call = client.makeBidiStreamRequest(
        method.path,
        method.requestSerialize,
        (bytes: Buffer) => bytes,
      );
      call.on("error", () => undefined); // ended by close(); nothing to report
      // Parts of a snapshot arrived so far and their bytes.
      let parts = 0;
      let partBytes = 0;
      call.on("data", (bytes: Buffer) => {
        const atMs = Date.now();
        const head = responseHead(bytes);
        if (head === undefined) return;
        parts++;
        partBytes += bytes.byteLength;
        if (parts < Math.max(1, head.parts)) return;
        const arrival = {
          stream: i,
          version: head.version,
          kind: head.kind,
          bytes: partBytes,
          atMs,
        };
        parts = 0;
        partBytes = 0;
        for (const listener of this.#listeners) listener(arrival);
        call.write(
          create(StreamSnapshotsRequestSchema, {
            message: { case: "ack", value: { version: BigInt(head.version), nonce: head.nonce } },
          }),
        );
      });
      call.write(
        create(StreamSnapshotsRequestSchema, {
          message: {
            case: "hello",
            value: {
              nodeId: `${namePrefix}-${i}`,
              hostname: "bench",
              softwareVersion: "bench",
              protocolVersion: PROTOCOL_VERSION,
              lastAppliedVersion: BigInt(lastAppliedVersion),
              acceptsDeltas: true,
            },
          },
        }),
      );
      this.#clients.push(client);
      this.#calls.push(call);
    }
  }

  /** Calls `listener` for every snapshot any stream receives; returns the function that stops. */
  onArrival(listener: (arrival: Arrival) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  close(): void {
    for (const call of this.#calls) call.cancel();
    for (const client of this.#clients) client.close();
  }
}

/**
 * Version (field 1) and nonce (field 2) of the Snapshot (field 1 of StreamSnapshotsResponse,
 * with its part count in field 9) or the SnapshotDelta (field 2), skipping the resources,
 * which are what make a message large.
 */
function responseHead(bytes: Uint8Array): Head | undefined {
  const outer = new BinaryReader(bytes);
  while (outer.pos < outer.len) {
    const [field, wire] = outer.tag();
    if ((field !== 1 && field !== 2) || wire !== WireType.LengthDelimited) {
      outer.skip(wire);
      continue;
    }
    const inner = new BinaryReader(outer.bytes());
    const head: Head = { kind: field === 1 ? "full" : "delta", version: 0, nonce: "", parts: 0 };
    while (inner.pos < inner.len) {
      const [innerField, innerWire] = inner.tag();
      if (innerField === 1) head.version = Number(inner.uint64());
      else if (innerField === 2) head.nonce = inner.string();
      else if (innerField === 9 && head.kind === "full") head.parts = inner.uint32();
      else inner.skip(innerWire);
    }
    return head;
  }
  return undefined;
}
