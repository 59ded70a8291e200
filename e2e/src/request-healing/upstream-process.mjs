// A tiny upstream that runs as its own process, so a test can kill it with SIGKILL like a
// crashed backend (seed 000 4.1: kill -9 of one of two instances). It answers every request
// with its name as JSON, /healthz with {"status":"ok"}, and prints {"port":N} once listening.
import { createServer } from "node:http";

const name = process.env.UPSTREAM_NAME ?? "upstream";
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const body =
      req.url === "/healthz"
        ? JSON.stringify({ status: "ok" })
        : JSON.stringify({ upstream: name, method: req.method, path: req.url });
    res.writeHead(200, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
    });
    res.end(body);
  });
});
server.listen(Number(process.env.UPSTREAM_PORT ?? 0), "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
