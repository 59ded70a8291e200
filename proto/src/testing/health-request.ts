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

/** A changes-only report: one node changed twice in order, another removed. */
export function changesOnlyRequest(): Uint8Array {
  return requestBytes({
    case: "health",
    value: {
      changesOnly: true,
      nodes: [healthOf("10.0.0.1:80", "quarantined"), healthOf("10.0.0.1:80", "evicted", "x", 3n)],
      removed: [create(NodeHealthSchema, { upstream: "agents", address: "10.0.0.3:80" })],
    },
  });
}
