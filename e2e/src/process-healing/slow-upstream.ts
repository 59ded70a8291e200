import { createServer } from "node:http";

export interface SlowUpstream {
  /** host:port, as an upstream node address. */
  address: string;
  /** Requests being answered right now. */
  readonly active: number;
  readonly served: number;
  close(): Promise<void>;
}

/** An upstream that answers every request after `delayMs`, like a slow-ish model backend. */
export async function startSlowUpstream(delayMs: number): Promise<SlowUpstream> {
  let active = 0;
  let served = 0;
  const server = createServer((req, res) => {
    req.resume();
    if (req.url === "/healthz") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"status":"ok"}');
      return;
    }
    active++;
    setTimeout(() => {
      active--;
      served++;
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("slow ok");
    }, delayMs);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const bound = server.address();
  if (bound === null || typeof bound === "string") throw new Error("no TCP address");
  return {
    address: `127.0.0.1:${bound.port}`,
    get active() {
      return active;
    },
    get served() {
      return served;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
