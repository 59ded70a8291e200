import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { InFlightList } from "./in-flight-list.js";

export interface DrainResult {
  /** True when every request finished before the deadline. */
  drained: boolean;
  /** Requests still running at the deadline, whose connections were cut. */
  cut: number;
}

/** Set on each response: what its shared close listener calls (its drain's, made once). */
const kClosed = Symbol("clawgate.httpDrain.closed");
type DrainedResponse = ServerResponse & { [kClosed]?: (res: ServerResponse) => void };

/**
 * Graceful stop for an http.Server: stop accepting, close idle keep-alive connections at once,
 * answer every later response with `Connection: close`, and close each connection as soon as
 * its last response is out. Attach before the server handles its first request.
 */
export class HttpDrain {
  readonly #server: Server;
  // Not a Set: see InFlightList for what a per-request Set costs the garbage collector.
  readonly #responses = new InFlightList<ServerResponse>();
  #draining = false;

  constructor(server: Server) {
    this.#server = server;
    // Runs before the request handler, so the header is set before anyone writes the head.
    server.prependListener("request", (_req: IncomingMessage, res: DrainedResponse) => {
      this.#responses.add(res);
      if (this.#draining) res.setHeader("connection", "close");
      // One 'close' listener shared by every response, which finds its drain on the response:
      // a closure and a once() wrapper per request cost the proxy's hot path two allocations
      // for a drain that almost never runs. 'close' is emitted once, so `on` is enough.
      res[kClosed] = this.#closed;
      res.on("close", onResponseClose);
    });
  }

  /** A response closed: sent, or its connection went. */
  readonly #closed = (res: ServerResponse): void => {
    this.#responses.delete(res);
    // A response whose head went out before the drain began kept its socket alive;
    // once it is done the socket is idle and can go.
    if (this.#draining) {
      const server = this.#server;
      setImmediate(() => server.closeIdleConnections());
    }
  };

  get draining(): boolean {
    return this.#draining;
  }

  get inFlight(): number {
    return this.#responses.size;
  }

  /** Stops accepting and waits up to `timeoutMs` for requests in flight, then cuts the rest. */
  drain(timeoutMs: number): Promise<DrainResult> {
    this.#draining = true;
    const server = this.#server;
    // Responses still to be written tell their clients not to reuse the connection.
    for (const res of this.#responses) if (!res.headersSent) res.setHeader("connection", "close");
    return new Promise((resolve) => {
      const deadline = setTimeout(() => {
        const cut = this.#responses.size;
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

/** The one 'close' listener of every response the drain tracks; `this` is the response. */
function onResponseClose(this: DrainedResponse): void {
  this[kClosed]?.(this);
}
