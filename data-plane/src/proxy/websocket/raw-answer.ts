import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import {
  type ErrorCode,
  errorBody,
  errorCatalog,
  retryAfterSeconds,
} from "../../errors/error-catalog.js";

/** A catalog error as either protocol writes it: status, JSON body, Retry-After seconds. */
export interface CatalogAnswer {
  readonly status: number;
  readonly body: string;
  readonly retryAfterSeconds: number | undefined;
}

/** The catalog's answer to `code`, a policy's own Retry-After (`retryAfterMs`) first. */
export function catalogAnswer(
  code: ErrorCode,
  requestId: string,
  retryAfterMs?: number,
): CatalogAnswer {
  const entry: { status: number; retryAfterSeconds?: number } = errorCatalog[code];
  return {
    status: entry.status,
    body: errorBody(code, requestId),
    retryAfterSeconds:
      retryAfterMs === undefined ? entry.retryAfterSeconds : retryAfterSeconds(retryAfterMs),
  };
}

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
  const { status, body, retryAfterSeconds: seconds } = catalogAnswer(code, requestId, retryAfterMs);
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
