export { create, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
export { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
export * from "./config/index.js";
export * from "./gen/clawgate/v1/config_pb.js";
export * from "./gen/clawgate/v1/snapshot_service_pb.js";
export * from "./received-health-report.js";
export * from "./snapshot-service.js";
export * from "./stream-limits.js";
