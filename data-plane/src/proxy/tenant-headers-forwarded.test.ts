import { createHash } from "node:crypto";
import { request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixedProxyHandler } from "../testing/fixed-proxy.js";
import { closeLoopbackServer, listenOnLoopback } from "../testing/loopback-server.js";
import { PoolRegistry } from "../upstream/pool-registry.js";

const KEY = "k-alpha";
const sha = (key: string) => createHash("sha256").update(key).digest("hex");

// What the upstream gets from an auth route: never the tenant key, in either header it came
// in, and never a client's own tenant claim, under any spelling a backend may read as one.
describe("headers forwarded from an auth route", () => {
  const pools = new PoolRegistry();
  let upstream: { server: Server; port: number };
  let proxy: { server: Server; port: number };

  beforeAll(async () => {
    // The upstream answers with the headers it received.
    upstream = await listenOnLoopback((req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(req.headers));
    });
    proxy = await listenOnLoopback(
      fixedProxyHandler(
        {
          upstreams: [{ name: "u", nodes: [{ address: `127.0.0.1:${upstream.port}`, weight: 1 }] }],
          routes: [
            {
              name: "api",
              match: { pathPrefix: "/" },
              upstream: "u",
              auth: { tenants: "optional" },
            },
          ],
          tenants: [{ name: "alpha", apiKeySha256: [sha(KEY)] }],
        },
        pools,
      ),
    );
  });

  afterAll(async () => {
    await closeLoopbackServer(proxy.server);
    await closeLoopbackServer(upstream.server);
    await pools.close();
  });

  /** The headers the upstream received for a request with `headers`. */
  function forwarded(headers: Record<string, string>): Promise<IncomingHttpHeaders> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        { host: "127.0.0.1", port: proxy.port, path: "/x", headers },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            body += chunk;
          });
          res.on("end", () => {
            if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}: ${body}`));
            else resolve(JSON.parse(body) as IncomingHttpHeaders);
          });
        },
      );
      req.on("error", reject);
      req.end();
    });
  }

  it("drops Authorization too when it carries as a bearer the key taken from x-api-key", async () => {
    const got = await forwarded({ "x-api-key": KEY, authorization: `Bearer ${KEY}` });
    expect(got["x-clawgate-tenant"]).toBe("alpha");
    expect(got["x-api-key"]).toBeUndefined();
    expect(got.authorization).toBeUndefined();
    expect(JSON.stringify(got)).not.toContain(KEY);
  });

  it("still forwards an Authorization that is not the key", async () => {
    const got = await forwarded({ "x-api-key": KEY, authorization: "Bearer for-the-upstream" });
    expect(got.authorization).toBe("Bearer for-the-upstream");
    expect(got["x-api-key"]).toBeUndefined();
  });

  it.each(["x_clawgate_tenant", "X_Clawgate_Tenant", "x-clawgate_tenant", "X_CLAWGATE-TENANT"])(
    "drops a client's %s, with a key and without",
    async (name) => {
      const withKey: Record<string, string> = { "x-api-key": KEY };
      for (const key of [withKey, {}]) {
        const got = await forwarded({ ...key, [name]: "mallory" });
        expect(JSON.stringify(got)).not.toContain("mallory");
        expect(got["x-clawgate-tenant"]).toBe(key === withKey ? "alpha" : undefined);
      }
    },
  );
});
