import { createServer } from "node:http";

export interface Squatter {
  /** Requests other than /healthz that reached it, in arrival order. */
  readonly hits: string[];
  /** /healthz probes answered. */
  readonly probes: number;
  close(): Promise<void>;
}

/**
 * Something else holding a node's port (seed 000 4.1, fault level 2): it accepts TCP and
 * answers HTTP, so the TCP screen passes, but /healthz says `{"status":"degraded"}` with a 200,
 * which only the fine check (expectStatus "ok") catches. Other requests get a 200 that is not
 * the node's answer, so a client that reaches it gets the wrong thing.
 */
export async function startSquatter(port: number): Promise<Squatter> {
  const hits: string[] = [];
  let probes = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url === "/healthz") {
        probes++;
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ status: "degraded" }));
        return;
      }
      hits.push(req.url ?? "");
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ squatter: true }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  return {
    hits,
    get probes() {
      return probes;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
