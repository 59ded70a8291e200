import type { IncomingMessage, Server, ServerResponse } from "node:http";

export interface DrainResult {
  /** True when every request finished before the deadline. */
  drained: boolean;
  /** Requests still running at the deadline, whose connections were cut. */
  cut: number;
}

/**
 * Graceful stop for an http.Server: stop accepting, close idle keep-alive connections at once,
 * answer every later response with `Connection: close`, and close each connection as soon as
 * its last response is out. Attach before the server handles its first request.
 */
export class HttpDrain {
  readonly #server: Server;
  readonly #responses = new Set<ServerResponse>();
  #draining = false;

  constructor(server: Server) {
    this.#server = server;
    // Runs before the request handler, so the header is set before anyone writes the head.
    server.prependListener("request", (_req: IncomingMessage, res: ServerResponse) => {
      this.#responses.add(res);
      if (this.#draining) res.setHeader("connection", "close");
      res.once("close", () => {
        this.#responses.delete(res);
        // A response whose head went out before the drain began kept its socket alive;
        // once it is done the socket is idle and can go.
        if (this.#draining) setImmediate(() => server.closeIdleConnections());
      });
    });
  }

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
