import dns from "node:dns";
import { afterEach, describe, expect, it, vi } from "vitest";
import { closeLoopbackServer, listenOnLoopback } from "../testing/loopback-server.js";
import { PoolRegistry } from "./pool-registry.js";

/**
 * A node given as a DNS name must follow its record as it changes (issue 11: re-resolved per
 * the TTL, not once at start). The pools never resolve a name themselves: each new connection
 * asks the system resolver (getaddrinfo, whose cache honours the record's TTL), so a changed
 * record is followed as connections are replaced. This pins that down: a pool that resolved
 * once and kept the address would look the name up once here, not per connection.
 */
describe("a node named by DNS", () => {
  afterEach(() => vi.restoreAllMocks());

  it("is resolved again for each new connection to it, not once when its pool is made", async () => {
    const lookups: string[] = [];
    const lookup = dns.lookup;
    vi.spyOn(dns, "lookup").mockImplementation(function (this: unknown, ...args: unknown[]) {
      if (typeof args[0] === "string") lookups.push(args[0]);
      return (lookup as (...a: unknown[]) => void).apply(this, args);
    } as typeof dns.lookup);
    // Each answer closes its connection, so every request needs a new one.
    const { server, port } = await listenOnLoopback((_req, res) =>
      res.writeHead(200, { connection: "close" }).end("ok"),
    );
    const pools = new PoolRegistry();
    try {
      const pool = pools.get(`localhost:${port}`);
      for (let i = 0; i < 3; i++) {
        const answer = await pool.request({ path: "/", method: "GET" });
        expect(answer.statusCode).toBe(200);
        await answer.body.text();
      }
      expect(lookups.filter((name) => name === "localhost")).toHaveLength(3);
    } finally {
      await pools.close();
      await closeLoopbackServer(server);
    }
  });
});
