import type { IncomingMessage, ServerResponse } from "node:http";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Wraps an admin handler so /readyz answers 503 while the process drains: load balancers and
 * Kubernetes stop sending new traffic before the listener goes away. Everything else passes.
 */
export function withDrainingReadiness(handler: Handler, draining: () => boolean): Handler {
  return (req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0];
    if (path !== "/readyz" || !draining()) {
      handler(req, res);
      return;
    }
    const body = JSON.stringify({
      status: "not ready",
      reason: "draining: the process is stopping",
    });
    res.writeHead(503, {
      "content-type": "application/json; charset=utf-8",
      "content-length": Buffer.byteLength(body),
      "cache-control": "no-store",
    });
    res.end(req.method === "HEAD" ? undefined : body);
  };
}
