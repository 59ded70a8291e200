import type {
  IncomingHttpHeaders,
  IncomingMessage,
  RequestListener,
  ServerResponse,
} from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { setHttp2Host } from "./h2-host.js";

/**
 * The TLS listener's request listener: an HTTP/1.1 request goes to the proxy handler as it is;
 * an HTTP/2 one (node:http2's compatibility request, which reads like an IncomingMessage) gets
 * the header view an HTTP/1.1 request would have had, so it passes the same routing and the
 * same pipeline to any upstream:
 * - the pseudo-headers (`:method`, `:path`, `:scheme`, `:authority`) are dropped, their values
 *   are in req.method and req.url already, and `:authority` becomes Host (RFC 9113 8.3.1: a
 *   client may send either, and Host is what routing and upstreams read; one that sends both
 *   naming different hosts gets 400, see h2-host.ts);
 * - a body of unknown length (HTTP/2 frames it, with no Content-Length) is marked
 *   `transfer-encoding: chunked`, which is how the proxy knows a body follows and how it is
 *   framed to an HTTP/1.1 upstream; hop-by-hop, it is never forwarded as such.
 * Responses need no translation: the proxy never sends a connection-specific header (they are
 * hop-by-hop, dropped from every upstream response), which HTTP/2 forbids.
 */
export function acceptHttp2(handler: RequestListener): RequestListener {
  return (req, res) => {
    if (req.httpVersionMajor === 2) {
      Object.defineProperty(req, "headers", {
        value: http1Headers(req as unknown as Http2ServerRequest),
        configurable: true,
      });
    }
    handler(req as IncomingMessage, res as ServerResponse);
  };
}

function http1Headers(req: Http2ServerRequest): IncomingHttpHeaders {
  const headers: IncomingHttpHeaders = {};
  const received = req.headers;
  for (const name in received) {
    if (name.charCodeAt(0) === 58 /* ":" */) continue;
    headers[name] = received[name];
  }
  setHttp2Host(req, headers);
  // endAfterHeaders: the HEADERS frame carried END_STREAM, so no body follows.
  if (!req.stream.endAfterHeaders && headers["content-length"] === undefined) {
    headers["transfer-encoding"] = "chunked";
  }
  return headers;
}
