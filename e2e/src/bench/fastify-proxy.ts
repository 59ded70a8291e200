import proxy from "@fastify/http-proxy";
import Fastify from "fastify";

/**
 * @fastify/http-proxy with its defaults, the well-known Node proxy the bench compares
 * Clawgate with. Run as its own process: `node fastify-proxy.js <port> <upstream origin>`.
 */
const [port, origin] = process.argv.slice(2);
if (port === undefined || origin === undefined) {
  process.stderr.write("usage: fastify-proxy <port> <upstream origin>\n");
  process.exit(2);
}
const app = Fastify({ logger: false });
await app.register(proxy, { upstream: origin });
await app.listen({ port: Number(port), host: "127.0.0.1" });
process.stdout.write("listening\n");
