import { randomBytes } from "node:crypto";

const MAX_INCOMING_LENGTH = 200;

/**
 * Request ids: a random per-process prefix plus a counter, unique across restarts and
 * replicas without paying for crypto on every request.
 */
export function createRequestIdSource(): () => string {
  const prefix = `${randomBytes(6).toString("hex")}-`;
  let counter = 0;
  return () => prefix + (++counter).toString(36);
}

/** The client's X-Request-Id when it sent a usable one (one value, bounded length). */
export function incomingRequestId(value: string | string[] | undefined): string | undefined {
  if (typeof value !== "string" || value.length === 0 || value.length > MAX_INCOMING_LENGTH) {
    return undefined;
  }
  return value;
}
