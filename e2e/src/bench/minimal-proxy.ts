import { createServer } from "node:http";
import { Pool } from "undici";

/**
 * The floor the bench compares Clawgate with: node:http in front of one undici Pool, relaying
 * with `dispatch` and nothing else (no routing, retries, breakers, metrics or hop-by-hop
 * filtering). Run as its own process: `node minimal-proxy.js <port> <upstream origin>`.
 */
const [port, origin] = process.argv.slice(2);
if (port === undefined || origin === undefined) {
  process.stderr.write("usage: minimal-proxy <port> <upstream origin>\n");
  process.exit(2);
}
const pool = new Pool(origin, { connections: 128, pipelining: 1 });

createServer((req, res) => {
  const hasBody = req.headers["content-length"] !== undefined || req.headers["transfer-encoding"];
  pool.dispatch(
    {
      method: req.method ?? "GET",
      path: req.url ?? "/",
      headers: req.headers,
      body: hasBody ? req : null,
    },
    {
      onRequestStart() {},
      onResponseStart(controller, status, headers) {
        res.writeHead(status, headers as Record<string, string>);
        res.on("drain", () => controller.resume());
      },
      onResponseData(controller, chunk) {
        if (!res.write(chunk)) controller.pause();
      },
      onResponseEnd() {
        res.end();
      },
      onResponseError() {
        if (res.headersSent) res.destroy();
        else res.writeHead(502).end();
      },
    },
  );
}).listen(Number(port), "127.0.0.1", () => process.stdout.write("listening\n"));
