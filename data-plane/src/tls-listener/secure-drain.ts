import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2SecureServer, ServerHttp2Session } from "node:http2";
import type { Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import type { DrainResult } from "@clawgate/runtime";

/**
 * Graceful stop for the TLS listener, which speaks HTTP/2 and HTTP/1.1 on one port (the
 * runtime's HttpDrain knows only http.Server). On drain: stop accepting; each HTTP/2 session
 * gets a GOAWAY (session.close(): streams in flight finish, no new ones start); each HTTP/1.1
 * response not yet started is told `Connection: close`, and an HTTP/1.1 connection with no
 * request in flight is closed at once. At the deadline whatever is left is cut.
 */
export class SecureDrain {
  readonly #server: Http2SecureServer;
  readonly #responses = new Set<unknown>();
  readonly #sessions = new Set<ServerHttp2Session>();
  readonly #sockets = new Set<TLSSocket>();
  /** HTTP/1.1 requests in flight per connection, to tell idle connections from busy ones. */
  readonly #busy = new Map<Socket, number>();
  #draining = false;

  constructor(server: Http2SecureServer) {
    this.#server = server;
    server.on("secureConnection", (socket: TLSSocket) => {
      this.#sockets.add(socket);
      socket.once("close", () => {
        this.#sockets.delete(socket);
        this.#busy.delete(socket);
      });
    });
    server.on("session", (session: ServerHttp2Session) => {
      this.#sessions.add(session);
      session.once("close", () => this.#sessions.delete(session));
      if (this.#draining) session.close();
    });
    // Runs before the request handler, so the header is set before anyone writes the head.
    server.prependListener("request", (req: IncomingMessage, res: ServerResponse) => {
      this.#responses.add(res);
      const http1 = req.httpVersionMajor < 2;
      const socket = req.socket;
      if (http1) {
        this.#busy.set(socket, (this.#busy.get(socket) ?? 0) + 1);
        if (this.#draining) res.setHeader("connection", "close");
      }
      res.once("close", () => {
        this.#responses.delete(res);
        if (!http1) return;
        const left = (this.#busy.get(socket) ?? 1) - 1;
        this.#busy.set(socket, left);
        if (this.#draining && left === 0) socket.end();
      });
    });
  }

  get inFlight(): number {
    return this.#responses.size;
  }

  /** Stops accepting and waits up to `timeoutMs` for requests in flight, then cuts the rest. */
  drain(timeoutMs: number): Promise<DrainResult> {
    this.#draining = true;
    for (const res of this.#responses) {
      const http1 = res as ServerResponse;
      if (!http1.headersSent && http1.req?.httpVersionMajor === 1) {
        http1.setHeader("connection", "close");
      }
    }
    return new Promise((resolve) => {
      const deadline = setTimeout(() => {
        const cut = this.#responses.size;
        for (const session of this.#sessions) session.destroy();
        for (const socket of this.#sockets) socket.destroy();
        resolve({ drained: false, cut });
      }, timeoutMs);
      // The callback runs once every connection has closed (or at once if not listening).
      this.#server.close(() => {
        clearTimeout(deadline);
        resolve({ drained: true, cut: 0 });
      });
      for (const session of this.#sessions) session.close();
      for (const socket of this.#sockets) {
        // An HTTP/1.1 connection with nothing in flight; HTTP/2 ones close with their session.
        if (socket.alpnProtocol !== "h2" && (this.#busy.get(socket) ?? 0) === 0) socket.end();
      }
    });
  }
}
