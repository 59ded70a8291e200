import { request, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accessLogSinkOn } from "../../access-log/access-log-sink.js";
import { AccessLogLines } from "../../testing/access-log-lines.js";
import { fixedProxyHandler } from "../../testing/fixed-proxy.js";
import { closeLoopbackServer, listenOnLoopback } from "../../testing/loopback-server.js";
import { PoolRegistry } from "../../upstream/pool-registry.js";

function get(port: number, path: string): Promise<{ status: number; id: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path }, (res) => {
      let bytes = 0;
      res.on("data", (c: Buffer) => {
        bytes += c.length;
      });
      res.on("end", () =>
        resolve({ status: res.statusCode!, id: String(res.headers["x-request-id"]), bytes }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

// A route policy's refusal answers with its own catalog error (401 here), not the 403 its
// failure kind (`rejected`) maps to: the line counted the 403 body's bytes.
describe("access log of a request a route policy refused", () => {
  const lines = new AccessLogLines();
  const pools = new PoolRegistry();
  let proxy: { server: Server; port: number };

  beforeAll(async () => {
    const snapshot = {
      upstreams: [{ name: "u", nodes: [{ address: "127.0.0.1:9", weight: 1 }] }],
      routes: [
        { name: "keyed", match: { pathPrefix: "/" }, upstream: "u", auth: { tenants: "required" } },
      ],
    };
    proxy = await listenOnLoopback(
      fixedProxyHandler(snapshot, pools, {
        accessLog: accessLogSinkOn(lines, { flushAfterMs: 1 }),
      }),
    );
  });

  afterAll(async () => {
    await closeLoopbackServer(proxy.server);
    await pools.close();
  });

  it("counts the bytes of the error the client got", async () => {
    const reply = await get(proxy.port, "/anything");
    expect(reply.status).toBe(401);
    const line = await lines.of(reply.id);
    expect(line).toMatchObject({ status: 401, failure: "rejected", attempts: 0 });
    expect(line.bytesOut).toBe(reply.bytes);
  });
});
