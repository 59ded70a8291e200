import { once } from "node:events";
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { HttpDrain } from "./http-drain.js";

/**
 * What the drain's bookkeeping of in-flight responses costs the garbage collector (see
 * InFlightList): after a full collection promoted it while requests were in flight, answered
 * responses must still die young. Each response carries 16 KiB of ballast, so responses kept
 * alive through scavenges show as old-generation growth far above what the rest of the
 * process promotes meanwhile. Measured in bytes, never in time.
 */
const BALLAST_BYTES = 16 * 1024;
const REQUESTS = 1_500;
const CONCURRENCY = 20;

type Gc = (options?: { type: "minor" | "major" }) => void;
let gc: Gc;
const kBallast = Symbol("ballast");

beforeAll(() => {
  setFlagsFromString("--expose-gc");
  gc = runInNewContext("gc") as Gc;
});

const server = createServer((_req, res) => {
  // A plain array of doubles: on the JS heap (a typed array's bytes would not be).
  (res as unknown as Record<symbol, unknown>)[kBallast] = new Array(BALLAST_BYTES / 8).fill(0.5);
  // Answered on a later turn, so several are in flight at once, as in a proxy.
  setImmediate(() => res.end("ok"));
});
new HttpDrain(server);
const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });

afterAll(() => {
  agent.destroy();
  server.closeAllConnections();
  server.close();
});

function get(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: "/", agent }, (res) => {
      res.resume();
      res.on("end", resolve);
    });
    req.on("error", reject);
    req.end();
  });
}

/** `count` requests, CONCURRENCY at a time, with a scavenge after every 100. */
async function serve(port: number, count: number, whileInFlight?: () => void): Promise<void> {
  let sent = 0;
  const lane = async () => {
    while (sent < count) {
      sent++;
      if (sent === Math.floor(count / 2)) whileInFlight?.();
      if (sent % 100 === 0) gc({ type: "minor" });
      await get(port);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
}

function oldSpaceUsed(): number {
  return getHeapSpaceStatistics().find((space) => space.space_name === "old_space")!
    .space_used_size;
}

it("lets answered responses die young after a full collection promoted the bookkeeping", async () => {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  await serve(port, 300);
  // A full collection with requests in flight: it promotes whatever is live then.
  await serve(port, 200, () => gc({ type: "major" }));
  const before = oldSpaceUsed();
  await serve(port, REQUESTS);
  const grown = oldSpaceUsed() - before;
  // With a Set the old generation grew by about half of all the ballast (12 MiB, against
  // 0.4 MiB with the list); a quarter leaves room for what the rest of the process promotes.
  expect(grown).toBeLessThan((REQUESTS * BALLAST_BYTES) / 4);
});
