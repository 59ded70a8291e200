import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import {
  NodeHealthSchema,
  StreamSnapshotsRequestSchema,
} from "../gen/clawgate/v1/snapshot_service_pb.js";

/** One node's health as a data plane reports it, on the upstream "agents". */
export const healthOf = (address: string, state: string, evidence = "", changedAtMs = 0n) =>
  create(NodeHealthSchema, { upstream: "agents", address, state, evidence, changedAtMs });

/** The bytes of a stream request carrying `value`, as a data plane sends them. */
export function requestBytes(
  value: MessageInitShape<typeof StreamSnapshotsRequestSchema>["message"],
): Uint8Array {
  return toBinary(
    StreamSnapshotsRequestSchema,
    create(StreamSnapshotsRequestSchema, { message: value }),
  );
}
