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
  bytes: number;
  atMs: number;
}

/**
 * Many data-plane streams in this one process, each on its own connection: they say Hello,
 * read only the version and nonce of each snapshot (never decoding or compiling the rest, so
 * a few hundred fit in one process) and Ack it, which is all the control plane can tell apart
 * from a real data plane.
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
      call.on("data", (bytes: Buffer) => {
        const atMs = Date.now();
        const head = snapshotHead(bytes);
        if (head === undefined) return;
        for (const listener of this.#listeners) {
          listener({ stream: i, version: head.version, bytes: bytes.byteLength, atMs });
        }
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
 * Version (field 1) and nonce (field 2) of the Snapshot in a StreamSnapshotsResponse
 * (field 1), skipping the routes and upstreams, which are what make a snapshot large.
 */
function snapshotHead(bytes: Uint8Array): { version: number; nonce: string } | undefined {
  const outer = new BinaryReader(bytes);
  while (outer.pos < outer.len) {
    const [field, wire] = outer.tag();
    if (field !== 1 || wire !== WireType.LengthDelimited) {
      outer.skip(wire);
      continue;
    }
    const inner = new BinaryReader(outer.bytes());
    let version = 0;
    let nonce = "";
    while (inner.pos < inner.len) {
      const [innerField, innerWire] = inner.tag();
      if (innerField === 1) version = Number(inner.uint64());
      else if (innerField === 2) nonce = inner.string();
      else inner.skip(innerWire);
    }
    return { version, nonce };
  }
  return undefined;
}
