import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import {
  type ErrorCode,
  errorBody,
  errorCatalog,
  retryAfterSeconds,
} from "../../errors/error-catalog.js";

/**
 * A catalog error written on a raw socket, as HTTP/1.1, then the socket ended: an upgrade
 * request has no ServerResponse, and a client waiting for 101 must still read why not.
 * Returns the status sent.
 */
export function answerRaw(
  socket: Duplex,
  code: ErrorCode,
  requestId: string,
  /** When the client may come back (a policy's 429), over the catalog's fixed Retry-After. */
  retryAfterMs?: number,
): number {
  const entry: { status: number; retryAfterSeconds?: number } = errorCatalog[code];
  const status = entry.status;
  const body = errorBody(code, requestId);
  const seconds =
    retryAfterMs === undefined ? entry.retryAfterSeconds : retryAfterSeconds(retryAfterMs);
  const retryAfter = seconds === undefined ? "" : `retry-after: ${seconds}\r\n`;
  if (!socket.writable) {
    socket.destroy();
    return status;
  }
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\n` +
      "content-type: application/json; charset=utf-8\r\n" +
      `content-length: ${Buffer.byteLength(body)}\r\n` +
      "cache-control: no-store\r\n" +
      `x-request-id: ${requestId}\r\n${retryAfter}` +
      "connection: close\r\n\r\n" +
      body,
  );
  return status;
}
