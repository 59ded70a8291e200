import { PROTOCOL_VERSION, PROTOCOL_VERSION_TRAILER } from "@clawgate/proto";
import { Metadata, type ServiceError, type status } from "@grpc/grpc-js";

/** The error a server handler emits on a call to end it with `code` and `details`. */
export function serviceError(code: status, details: string): ServiceError {
  const metadata = new Metadata();
  metadata.set(PROTOCOL_VERSION_TRAILER, String(PROTOCOL_VERSION));
  return Object.assign(new Error(details), { code, details, metadata });
}
