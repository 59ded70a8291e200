import { PROTOCOL_VERSION } from "@clawgate/proto";
import { Metadata, type ServiceError, type status } from "@grpc/grpc-js";

/** Trailer naming the protocol this control plane speaks, so a refused data plane can log it. */
export const PROTOCOL_VERSION_TRAILER = "clawgate-protocol-version";

/** The error a server handler emits on a call to end it with `code` and `details`. */
export function serviceError(code: status, details: string): ServiceError {
  const metadata = new Metadata();
  metadata.set(PROTOCOL_VERSION_TRAILER, String(PROTOCOL_VERSION));
  return Object.assign(new Error(details), { code, details, metadata });
}
