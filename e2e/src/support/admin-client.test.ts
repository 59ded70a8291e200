import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminClient } from "./admin-client.js";

/** A server that answers each admin path with a fixed ETag and body, as the control plane would. */
const answers: Record<string, { etag?: string; body: unknown }> = {
  "PUT /v1/routes/a": { etag: '"41"', body: { revision: 41 } },
  "DELETE /v1/routes/a": { etag: '"60"', body: { revision: 60 } },
  "POST /v1/apply": {
    body: {
      ok: true,
      revision: 99,
      results: [
        { kind: "route", name: "x", action: "unchanged", revision: 12 },
        { kind: "route", name: "y", action: "updated", revision: 50 },
      ],
    },
  },
};

let server: Server;
let client: AdminClient;

beforeAll(async () => {
  server = createServer((request, response) => {
    const answer = answers[`${request.method} ${request.url}`];
    request.resume();
    request.on("end", () => {
      if (answer === undefined) return response.writeHead(404).end();
      response.writeHead(200, {
        "content-type": "application/json",
        ...(answer.etag === undefined ? {} : { etag: answer.etag }),
      });
      response.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  client = new AdminClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, "t");
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe("AdminClient.lastConfigRevision", () => {
  it("follows the newest revision config writes produced, never going back", async () => {
    expect(client.lastConfigRevision).toBe(0);
    await client.putRoute("a", {});
    expect(client.lastConfigRevision).toBe(41);
    // An apply counts the resources it changed, not its commit revision or unchanged ones.
    await client.apply([]);
    expect(client.lastConfigRevision).toBe(50);
    await client.apply([], { dryRun: true });
    expect(client.lastConfigRevision).toBe(50);
    await client.delete("routes", "a");
    expect(client.lastConfigRevision).toBe(60);
    await client.putRoute("a", {});
    expect(client.lastConfigRevision).toBe(60);
  });
});
