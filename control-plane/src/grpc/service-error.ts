import { Metadata, type ServiceError, type status } from "@grpc/grpc-js";

/** The error a server handler emits on a call to end it with `code` and `details`. */
export function serviceError(code: status, details: string): ServiceError {
  return Object.assign(new Error(details), { code, details, metadata: new Metadata() });
}
