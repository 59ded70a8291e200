import { fromBinary, toBinary } from "@bufbuild/protobuf";
import type { ServiceDefinition } from "@grpc/grpc-js";
import {
  type StreamSnapshotsRequest,
  StreamSnapshotsRequestSchema,
  type StreamSnapshotsResponse,
  StreamSnapshotsResponseSchema,
} from "./gen/clawgate/v1/snapshot_service_pb.js";
import { decodeRequest } from "./health-report-decode.js";

/** The protocol both sides speak; a stream whose Hello names another is refused. */
export const PROTOCOL_VERSION = 1;

/** Trailer in which a control plane that refuses a stream names the protocol it speaks. */
export const PROTOCOL_VERSION_TRAILER = "clawgate-protocol-version";

/**
 * Response header (initial metadata) a control plane sends, with the value "1", on every
 * snapshot stream when it takes NodeHealthReport with changes_only. A data plane sends
 * changes-only reports only where it saw it, so an older control plane gets whole views.
 */
export const HEALTH_CHANGES_HEADER = "clawgate-health-changes";

/**
 * What the control plane writes on a stream: a message, or the bytes of one already encoded.
 * A snapshot is encoded once per version and the same bytes go to every data plane.
 */
export type EncodedOrResponse = StreamSnapshotsResponse | Uint8Array;

/**
 * What the data plane writes on a stream: a message, or the bytes of one it encoded itself
 * (a health report of 20,000 nodes is put together from each node's cached encoding).
 */
export type EncodedOrRequest = StreamSnapshotsRequest | Uint8Array;

export function encodeResponse(message: StreamSnapshotsResponse): Uint8Array {
  return toBinary(StreamSnapshotsResponseSchema, message);
}

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * grpc-js definition of clawgate.v1.SnapshotService, built by hand because protoc-gen-es
 * generates messages and descriptors only; the codecs are protobuf-es's.
 */
export const snapshotServiceDefinition = {
  streamSnapshots: {
    path: "/clawgate.v1.SnapshotService/StreamSnapshots",
    requestStream: true,
    responseStream: true,
    requestSerialize: (message: EncodedOrRequest) =>
      toBuffer(
        message instanceof Uint8Array ? message : toBinary(StreamSnapshotsRequestSchema, message),
      ),
    requestDeserialize: (bytes: Buffer) => decodeRequest(bytes),
    responseSerialize: (message: EncodedOrResponse) =>
      toBuffer(message instanceof Uint8Array ? message : encodeResponse(message)),
    responseDeserialize: (bytes: Buffer) => fromBinary(StreamSnapshotsResponseSchema, bytes),
  },
} satisfies ServiceDefinition;

export type SnapshotServiceDefinition = typeof snapshotServiceDefinition;
