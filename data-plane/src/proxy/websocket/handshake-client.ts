import { type IncomingHttpHeaders, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import type { ErrorCode } from "../../errors/error-catalog.js";
import { answerRaw } from "./raw-answer.js";

/**
 * The client's side of one WebSocket handshake, in the protocol it came over: an HTTP/1.1
 * Upgrade on a raw socket, or an HTTP/2 extended CONNECT (RFC 8441) on one stream. The
 * upgrade handler routes, picks and dispatches the same way for both; only how an answer is
 * written differs, and after it the tunnel relays bytes on `stream` either way.
 */
export interface HandshakeClient {
  /** What the tunnel relays and what a relayed refusal's body is written to. */
  readonly stream: Duplex;
  /** The status the client sees when the node switched protocols (101, or 200 on HTTP/2). */
  readonly acceptedStatus: number;
  /** A catalog error as this protocol's answer, then the end; returns the status sent. */
  refuse(code: ErrorCode, requestId: string, retryAfterMs?: number): number;
  /** The node's 101 as this protocol's success; its handshake headers relayed. */
  accept(nodeHeaders: IncomingHttpHeaders, requestId: string): void;
  /**
   * The head of a node's answer other than 101 (flat [name, value, ...] end-to-end fields);
   * its body follows on `stream`, then the end.
   */
  relayHead(status: number, statusMessage: string | undefined, fields: readonly string[]): void;
}

/** An HTTP/1.1 handshake: answers are written as raw HTTP/1.1 on the client's socket. */
export function http1HandshakeClient(socket: Duplex): HandshakeClient {
  return {
    stream: socket,
    acceptedStatus: 101,
    refuse: (code, requestId, retryAfterMs) => answerRaw(socket, code, requestId, retryAfterMs),
    accept(nodeHeaders, requestId) {
      socket.write(switchingProtocols(nodeHeaders, requestId));
    },
    relayHead(status, statusMessage, fields) {
      let head = `HTTP/1.1 ${status} ${statusMessage || STATUS_CODES[status] || ""}\r\n`;
      for (let i = 0; i < fields.length; i += 2) head += `${fields[i]}: ${fields[i + 1]}\r\n`;
      // The client's connection ends with this answer (it asked to leave HTTP, so nothing may
      // follow on it): the body is delimited by the close, whatever framing the node used.
      socket.write(`${head}connection: close\r\n\r\n`);
    },
  };
}

/** The node's 101, relayed with the request id added (its handshake headers kept as sent). */
function switchingProtocols(headers: IncomingHttpHeaders, requestId: string): string {
  let out = "HTTP/1.1 101 Switching Protocols\r\n";
  for (const name in headers) {
    if (name === "x-request-id") continue;
    const value = headers[name];
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) out += `${name}: ${item}\r\n`;
  }
  return `${out}x-request-id: ${requestId}\r\n\r\n`;
}
