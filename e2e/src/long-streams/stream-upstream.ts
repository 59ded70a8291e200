import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface StreamUpstream {
  /** host:port, as an upstream node address. */
  address: string;
  close(): Promise<void>;
}

/**
 * An upstream of long streams. GET /events?count=N&gapMs=G answers server-sent events, one
 * every G ms, then ends: a stream whose life is set by the upstream, not by the test. GET
 * /silent answers a chunked body, sends one chunk, then says nothing more (an idle stream).
 * GET /healthz answers {"status":"ok"} for the data plane's probes.
 */
export async function startStreamUpstream(): Promise<StreamUpstream> {
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://upstream");
    if (url.pathname === "/healthz") {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ status: "ok" }));
    } else if (url.pathname.endsWith("/events")) {
      const count = Number(url.searchParams.get("count") ?? "3");
      const gapMs = Number(url.searchParams.get("gapMs") ?? "100");
      response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      sendEvents(response, count, gapMs, timers);
    } else {
      response.writeHead(200, { "content-type": "application/x-ndjson" });
      response.write('{"token":"first"}\n');
    }
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

function sendEvents(
  response: ServerResponse,
  count: number,
  gapMs: number,
  timers: Set<NodeJS.Timeout>,
): void {
  let sent = 0;
  const next = () => {
    response.write(`id: ${sent}\ndata: event ${sent}\n\n`);
    sent++;
    if (sent === count) {
      response.end();
      return;
    }
    const timer = setTimeout(() => {
      timers.delete(timer);
      next();
    }, gapMs);
    timers.add(timer);
  };
  next();
}
