import { randomBytes } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { Http2SecureServer, Http2ServerRequest } from "node:http2";
import type { Duplex } from "node:stream";
import { setHttp2Host } from "./h2-host.js";

const NO_HEAD = Buffer.alloc(0);

/**
 * WebSocket over HTTP/2 (RFC 8441) on the TLS listener. The listener advertises
 * SETTINGS_ENABLE_CONNECT_PROTOCOL, and a client opens a WebSocket with an extended CONNECT
 * (`:method: CONNECT`, `:protocol: websocket`) on one stream. That request is handed to the
 * server's 'upgrade' listeners, the very handler HTTP/1.1 handshakes reach, as the HTTP/1.1
 * handshake it stands for (RFC 8441 section 5 maps one onto the other): a GET with
 * `Upgrade: websocket`, Host from `:authority`, and its stream in place of a socket. So it is
 * routed (a route limited to GET matches it), checked by policies and the breaker, and
 * tunnelled exactly like an HTTP/1.1 handshake, and counted in the same tunnels metric.
 *
 * Upstream it becomes an HTTP/1.1 Upgrade, which needs a Sec-WebSocket-Key the HTTP/2 client
 * never sends (the stream's own setup replaces that check): a fresh random one is made here.
 *
 * A plain CONNECT (no `:protocol`) reaches the handler without Upgrade and is refused with
 * the catalog's 400; an HTTP/1.1 CONNECT on the same port is closed, as the plaintext
 * listener's node:http does with no 'connect' listener.
 */
export function acceptExtendedConnect(server: Http2SecureServer): void {
  server.on("connect", (req: Http2ServerRequest, socketOrResponse: unknown) => {
    if (req.httpVersionMajor !== 2) {
      (socketOrResponse as Duplex).destroy();
      return;
    }
    if (server.listenerCount("upgrade") === 0) {
      // Nothing tunnels here (a server built without the upgrade handler): no hanging stream.
      req.stream.respond({ ":status": 501 }, { endStream: true });
      return;
    }
    Object.defineProperty(req, "headers", { value: handshakeHeaders(req), configurable: true });
    Object.defineProperty(req, "method", { value: "GET", configurable: true });
    server.emit("upgrade", req, req.stream, NO_HEAD);
  });
}

function handshakeHeaders(req: Http2ServerRequest): IncomingHttpHeaders {
  const received = req.headers;
  const headers: IncomingHttpHeaders = {};
  for (const name in received) {
    if (name.charCodeAt(0) === 58 /* ":" */) continue;
    headers[name] = received[name];
  }
  setHttp2Host(req, headers);
  const protocol = received[":protocol"];
  if (typeof protocol === "string") {
    headers.upgrade = protocol;
    headers.connection = "upgrade";
    headers["sec-websocket-key"] = randomBytes(16).toString("base64");
  }
  return headers;
}
