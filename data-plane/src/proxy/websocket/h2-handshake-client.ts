import type { IncomingHttpHeaders } from "node:http";
import type { OutgoingHttpHeaders, ServerHttp2Stream } from "node:http2";
import { connectionTokens, isHopByHop } from "../hop-by-hop.js";
import type { HandshakeClient } from "./handshake-client.js";
import { catalogAnswer } from "./raw-answer.js";

/**
 * An HTTP/2 handshake (extended CONNECT, RFC 8441): answers are HEADERS on the client's
 * stream, and the node's 101 becomes a 200 (section 5: a 2xx opens the tunnel). The tunnel is
 * the stream itself, so the client's other streams on that connection go on beside it.
 */
export function http2HandshakeClient(stream: ServerHttp2Stream): HandshakeClient {
  /** False once the stream is gone (the client reset it): nothing can be sent on it. */
  const open = () => !stream.destroyed && !stream.closed && !stream.headersSent;
  return {
    stream,
    acceptedStatus: 200,
    refuse(code, requestId, retryAfterMs) {
      const answer = catalogAnswer(code, requestId, retryAfterMs);
      if (!open()) {
        stream.destroy();
        return answer.status;
      }
      const headers: OutgoingHttpHeaders = {
        ":status": answer.status,
        "content-type": "application/json; charset=utf-8",
        "content-length": Buffer.byteLength(answer.body),
        "cache-control": "no-store",
        "x-request-id": requestId,
      };
      if (answer.retryAfterSeconds !== undefined) {
        headers["retry-after"] = String(answer.retryAfterSeconds);
      }
      stream.respond(headers);
      stream.end(answer.body);
      return answer.status;
    },
    accept(nodeHeaders, requestId) {
      if (open()) stream.respond(acceptedHeaders(nodeHeaders, requestId));
    },
    relayHead(status, _statusMessage, fields) {
      if (!open()) return;
      const headers: OutgoingHttpHeaders = { ":status": status };
      for (let i = 0; i < fields.length; i += 2) {
        const name = fields[i]!;
        const value = fields[i + 1]!;
        const prior = headers[name];
        if (prior === undefined) headers[name] = value;
        else headers[name] = Array.isArray(prior) ? [...prior, value] : [String(prior), value];
      }
      stream.respond(headers);
    },
  };
}

/**
 * The node's 101 headers as the client's 200: what describes the HTTP/1.1 connection
 * (Connection, Upgrade, and Sec-WebSocket-Accept, which answers a key the client never sent:
 * the proxy made it) is dropped, as HTTP/2 forbids connection-specific fields; the rest
 * (Sec-WebSocket-Protocol, -Extensions, cookies) is relayed.
 */
function acceptedHeaders(nodeHeaders: IncomingHttpHeaders, requestId: string): OutgoingHttpHeaders {
  const named = connectionTokens(nodeHeaders.connection);
  const out: OutgoingHttpHeaders = { ":status": 200 };
  for (const name in nodeHeaders) {
    if (name === "x-request-id" || name === "sec-websocket-accept") continue;
    if (isHopByHop(name, named)) continue;
    const value = nodeHeaders[name];
    if (value !== undefined) out[name] = value;
  }
  out["x-request-id"] = requestId;
  return out;
}
