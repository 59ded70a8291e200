import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { InFlightList } from "./in-flight-list.js";

export interface DrainResult {
  /** True when every request finished before the deadline. */
  drained: boolean;
  /** Requests still running at the deadline, whose connections were cut. */
  cut: number;
}

/**
 * node:http's link from a connection to the response it is writing now, set when the response
 * takes the socket and cleared when it finishes (ServerResponse.assignSocket / detachSocket).
 */
type ServingSocket = Socket & { _httpMessage?: ServerResponse | null };

/**
 * Graceful stop for an http.Server: stop accepting, close idle keep-alive connections at once,
 * answer every later response with `Connection: close`, and close each connection as soon as
 * its last response is out. Attach before the server accepts its first connection.
 *
 * It keeps connections, not requests: one entry per connection, and nothing at all per request
 * until the drain begins. A proxy serves many requests on each keep-alive connection, and work
 * per request on the response (a second 'request' listener, whose emit copies the listener
 * list; properties added to each ServerResponse, which give it another hidden class than
 * node:http's own code sees elsewhere; a second 'close' listener) was paid on every request
 * for a drain that almost never runs. What a connection is answering now is the response
 * node:http has assigned it.
 */
export class HttpDrain {
  readonly #server: Server;
  // Not a Set: see InFlightList for what a Set that takes and drops items costs the collector.
  readonly #connections = new InFlightList<ServingSocket>();
  #draining = false;

  constructor(server: Server) {
    this.#server = server;
    const connections = this.#connections;
    server.on("connection", (socket: ServingSocket) => {
      connections.add(socket);
      socket.once("close", () => connections.delete(socket));
    });
  }

  get draining(): boolean {
    return this.#draining;
  }

  /** Responses being written now: those of connections with a response assigned. */
  get inFlight(): number {
    let count = 0;
    for (const socket of this.#connections) if (socket._httpMessage) count++;
    return count;
  }

  /** Stops accepting and waits up to `timeoutMs` for requests in flight, then cuts the rest. */
  drain(timeoutMs: number): Promise<DrainResult> {
    const server = this.#server;
    if (!this.#draining) {
      this.#draining = true;
      // A response whose head went out before the drain began keeps its connection alive; once
      // it is done the connection is idle and can go.
      const closeIdleSoon = () => setImmediate(() => server.closeIdleConnections());
      // Requests that arrive from now on are told not to reuse the connection; this listener
      // runs before the application's, so the header is set before anyone writes the head.
      server.prependListener("request", (_req: IncomingMessage, res: ServerResponse) => {
        res.setHeader("connection", "close");
        res.once("close", closeIdleSoon);
      });
      for (const socket of this.#connections) {
        const res = socket._httpMessage;
        if (!res) continue;
        if (!res.headersSent) res.setHeader("connection", "close");
        res.once("close", closeIdleSoon);
      }
    }
    return new Promise((resolve) => {
      const deadline = setTimeout(() => {
        const cut = this.inFlight;
        server.closeAllConnections();
        resolve({ drained: false, cut });
      }, timeoutMs);
      // The callback runs once every connection has closed (or at once if not listening).
      server.close(() => {
        clearTimeout(deadline);
        resolve({ drained: true, cut: 0 });
      });
      server.closeIdleConnections();
    });
  }
}
