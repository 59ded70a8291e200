import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

const TOKEN = "admin-token-0123456789abcdef";
const SECRET = "SECRET-in-the-query-4242";

const stores: Store[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
});

/** An admin app on the embedded store whose every log line (trace and up) is captured. */
async function loggedApp() {
  const store = await openEmbeddedStore({});
  stores.push(store);
  const lines: string[] = [];
  const logger = pino({ level: "trace" }, { write: (line: string) => lines.push(line) });
  const app = await buildAdminApp({
    config: new ConfigService(store, "/clawgate/"),
    snapshot: {
      status: () => ({
        version: 1,
        published: true,
        publishedVersion: 1,
        counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
      }),
    },
    fleet: { list: () => [] },
    token: TOKEN,
    logger,
  });
  return { app, lines };
}

describe("admin API request log", () => {
  it("logs the path of each request but never its query string nor the Authorization header", async () => {
    const { app, lines } = await loggedApp();
    const auth = { authorization: `Bearer ${TOKEN}` };
    const requests = [
      { method: "GET" as const, url: `/v1/routes?token=${SECRET}`, headers: auth },
      { method: "GET" as const, url: `/v1/routes?token=${SECRET}` },
      { method: "GET" as const, url: `/v1/nowhere?token=${SECRET}`, headers: auth },
      { method: "GET" as const, url: `/healthz?token=${SECRET}` },
      {
        method: "PUT" as const,
        url: `/v1/upstreams/agents?token=${SECRET}`,
        headers: { ...auth, "content-type": "application/json" },
        payload: "{not json",
      },
    ];
    const statuses: number[] = [];
    for (const request of requests) statuses.push((await app.inject(request)).statusCode);
    await app.close();

    expect(statuses).toEqual([200, 401, 404, 200, 400]);
    const log = lines.join("");
    // The log is not empty: each request is there, by its path alone.
    const urls = lines.map((line) => JSON.parse(line).req?.url).filter(Boolean);
    expect(urls).toEqual([
      "/v1/routes",
      "/v1/routes",
      "/v1/nowhere",
      "/healthz",
      "/v1/upstreams/agents",
    ]);
    expect(log).not.toContain(SECRET);
    expect(log).not.toContain(TOKEN);
    expect(log.toLowerCase()).not.toContain("authorization");
  });
});
