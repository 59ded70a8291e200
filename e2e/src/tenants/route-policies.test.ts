import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  answer,
  type ScriptedUpstream,
  startScriptedUpstream,
} from "../request-healing/scripted-upstream.js";
import {
  type ControlPlane,
  type DataPlane,
  metricSum,
  startControlPlane,
  startDataPlane,
  Teardown,
  tenantResource,
  waitForConvergence,
} from "../support/index.js";
import { startEchoUpstream } from "../websocket/echo-upstream.js";
import { openWs } from "../websocket/ws-client.js";

const ALPHA_KEY = "alpha-secret-key-1";
const BETA_KEY = "beta-secret-key-2";
const SOCKET_KEY = "socket-secret-key-3";

/** What the upstream saw of one request. */
interface Seen {
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

// Issue 12: the data plane enforces tenants and route policies. One control plane (embedded
// store), one data plane, scripted upstreams that record what reaches them.
describe("route policies on real processes", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  let echo: ScriptedUpstream;
  let models: ScriptedUpstream;
  const seen: Seen[] = [];

  beforeAll(async () => {
    echo = await startScriptedUpstream((req, res) => {
      seen.push({ url: req.url ?? "", headers: { ...req.headers } });
      res.writeHead(200, { "content-type": "text/plain", "x-internal": "secret" }).end("ok");
    });
    teardown.add("echo upstream", () => echo.close());
    models = await startScriptedUpstream(answer(200, "ok"));
    teardown.add("models upstream", () => models.close());

    const sockets = await startEchoUpstream();
    teardown.add("websocket upstream", () => sockets.close());
    // An hour-long minute window: the handshake budget cannot reset half-way through by bad luck.
    cp = await startControlPlane({ CLAWGATE_QUOTA_MINUTE_MS: "3600000" });
    teardown.add("control plane", () => cp.stop());
    const route = (name: string, spec: Record<string, unknown>) => ({
      kind: "route" as const,
      name,
      spec: { upstream: "echo", retry: { attempts: 0 }, ...spec },
    });
    const write = await cp.admin.apply([
      { kind: "upstream", name: "echo", spec: { nodes: [{ address: echo.address }] } },
      {
        kind: "upstream",
        name: "models",
        spec: { nodes: [{ address: models.address }], retryAfterScope: "tenant" },
      },
      { kind: "upstream", name: "sockets", spec: { nodes: [{ address: sockets.address }] } },
      tenantResource("alpha", ALPHA_KEY),
      tenantResource("socket", SOCKET_KEY, { requestsPerMinute: 3 }),
      route("sockets", {
        match: { pathPrefix: "/ws" },
        upstream: "sockets",
        auth: { tenants: "required" },
      }),
      route("browser-private", {
        match: { pathPrefix: "/app" },
        cors: { allowOrigins: ["https://app.example"] },
        auth: { tenants: "required" },
      }),
      tenantResource("beta", BETA_KEY, { allowedRoutes: ["models"] }),
      route("private", { match: { pathPrefix: "/private" }, auth: { tenants: "required" } }),
      route("models", {
        match: { pathPrefix: "/models" },
        upstream: "models",
        auth: { tenants: "required" },
      }),
      route("browser", {
        match: { pathPrefix: "/browser" },
        cors: { allowOrigins: ["https://app.example"], exposeHeaders: ["x-request-id"] },
      }),
      route("denied", { match: { pathPrefix: "/denied" }, ipDeny: ["127.0.0.0/8", "::1/128"] }),
      route("allowed", { match: { pathPrefix: "/allowed" }, ipAllow: ["10.0.0.0/8"] }),
      route("headers", {
        match: { pathPrefix: "/headers" },
        requestHeaders: { set: { "x-added": "yes" }, remove: ["x-drop"] },
        responseHeaders: { set: { "x-served-by": "clawgate" }, remove: ["x-internal"] },
      }),
      // Retries on: a chunked body is then kept for replay, and must be cut all the same.
      route("upload", {
        match: { pathPrefix: "/upload" },
        maxBodyBytes: 1024,
        retry: { attempts: 2 },
      }),
    ]);
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
  });

  afterAll(() => teardown.run());

  const get = (path: string, headers: Record<string, string> = {}, method = "GET") =>
    fetch(`${dp.proxyUrl}${path}`, { method, headers, signal: AbortSignal.timeout(5_000) });
  const errorCode = async (response: Response) =>
    ((await response.json()) as { error: { code: string } }).error.code;

  it("answers 401 without a key or with an unknown one, 403 off allowedRoutes, 200 with a key", async () => {
    const before = seen.length;
    const none = await get("/private/a");
    expect(none.status).toBe(401);
    expect(await errorCode(none)).toBe("CLAWGATE_UNAUTHORIZED");
    const unknown = await get("/private/a", { "x-api-key": "not-a-key" });
    expect(unknown.status).toBe(401);
    const offRoute = await get("/private/a", { authorization: `Bearer ${BETA_KEY}` });
    expect(offRoute.status).toBe(403);
    expect(await errorCode(offRoute)).toBe("CLAWGATE_FORBIDDEN");
    expect(seen.length).toBe(before);

    const ok = await get("/private/a", { "x-api-key": ALPHA_KEY });
    expect(ok.status).toBe(200);
    const bearer = await get("/private/b", { authorization: `Bearer ${ALPHA_KEY}` });
    expect(bearer.status).toBe(200);
    expect(seen.length).toBe(before + 2);
  });

  it("never forwards the key, forwards the tenant, and drops a client's x-clawgate-tenant", async () => {
    await get("/private/key", { "x-api-key": ALPHA_KEY, "x-clawgate-tenant": "beta" });
    await get("/private/bearer", { authorization: `Bearer ${ALPHA_KEY}` });
    await get("/headers/spoof", { "x-clawgate-tenant": "alpha" });
    const byUrl = (url: string) => seen.find((request) => request.url === url)!;
    for (const url of ["/private/key", "/private/bearer"]) {
      const headers = byUrl(url).headers;
      expect(headers["x-api-key"]).toBeUndefined();
      expect(headers.authorization).toBeUndefined();
      expect(JSON.stringify(headers)).not.toContain(ALPHA_KEY);
      expect(headers["x-clawgate-tenant"]).toBe("alpha");
    }
    expect(byUrl("/headers/spoof").headers["x-clawgate-tenant"]).toBeUndefined();
  });

  it("a tenant-scoped 429 with Retry-After stops that tenant only", async () => {
    models.script = (req, res) => {
      if (req.headers["x-clawgate-tenant"] === "alpha") {
        res.writeHead(429, { "retry-after": "60" }).end("slow down");
      } else {
        res.writeHead(200).end("ok");
      }
    };
    const throttled = await get("/models/chat", { "x-api-key": ALPHA_KEY });
    expect(throttled.status).toBe(429);
    const hitsAfter429 = models.hits.length;
    // alpha is now held back by the gateway itself, without reaching the upstream...
    const held = await get("/models/chat", { "x-api-key": ALPHA_KEY });
    expect(held.status).toBe(503);
    expect(await errorCode(held)).toBe("CLAWGATE_UPSTREAM_COOLDOWN");
    expect(Number(held.headers.get("retry-after"))).toBeGreaterThan(1);
    expect(models.hits.length).toBe(hitsAfter429);
    // ...while beta keeps flowing to the same upstream.
    for (let i = 0; i < 3; i++) {
      const other = await get("/models/chat", { "x-api-key": BETA_KEY });
      expect(other.status).toBe(200);
    }
    expect(models.hits.length).toBe(hitsAfter429 + 3);
  });

  it("answers a CORS preflight itself and adds CORS headers to responses", async () => {
    const before = echo.hits.length;
    const preflight = await get(
      "/browser/x",
      {
        origin: "https://app.example",
        "access-control-request-method": "PUT",
        "access-control-request-headers": "content-type",
      },
      "OPTIONS",
    );
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(preflight.headers.get("access-control-allow-methods")).toBe("PUT");
    expect(preflight.headers.get("access-control-allow-headers")).toBe("content-type");
    expect(preflight.headers.get("access-control-max-age")).toBe("600");
    expect(echo.hits.length).toBe(before);

    const foreign = await get(
      "/browser/x",
      { origin: "https://evil.example", "access-control-request-method": "PUT" },
      "OPTIONS",
    );
    expect(foreign.status).toBe(204);
    expect(foreign.headers.get("access-control-allow-origin")).toBeNull();

    const simple = await get("/browser/x", { origin: "https://app.example" });
    expect(simple.status).toBe(200);
    expect(simple.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(simple.headers.get("access-control-expose-headers")).toBe("x-request-id");
    expect(simple.headers.get("vary")).toContain("Origin");
  });

  it("puts CORS headers on the gateway's own 401 and 403, so a browser page can read them", async () => {
    const origin = { origin: "https://app.example" };
    const unauthorized = await get("/app/x", origin);
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(unauthorized.headers.get("vary")).toContain("Origin");
    const forbidden = await get("/app/x", { ...origin, "x-api-key": BETA_KEY });
    expect(forbidden.status).toBe(403);
    expect(forbidden.headers.get("access-control-allow-origin")).toBe("https://app.example");
    // A foreign origin is still told nothing.
    const foreign = await get("/app/x", { origin: "https://evil.example" });
    expect(foreign.status).toBe(401);
    expect(foreign.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("holds a tenant's requestsPerMinute on WebSocket handshakes and counts them by tenant", async () => {
    const key = { "x-api-key": SOCKET_KEY };
    for (let i = 0; i < 3; i++) {
      const ws = await openWs(dp.proxyUrl, "/ws/chat", key);
      expect(ws.statusLine).toContain(" 101 ");
      ws.socket.destroy();
    }
    const refused = await openWs(dp.proxyUrl, "/ws/chat", key);
    expect(refused.statusLine).toContain(" 429 ");
    expect(refused.answer).toContain("CLAWGATE_RATE_LIMITED");
    expect(refused.answer).toMatch(/retry-after: \d+/i);
    const metrics = await dp.metrics();
    const count = (code: string) =>
      metricSum(metrics, "clawgate_tenant_requests_total", { tenant: "socket", code });
    expect(count("101")).toBe(3);
    expect(count("429")).toBe(1);
  });

  it("refuses a client address in ipDeny, or outside ipAllow, with 403", async () => {
    const before = echo.hits.length;
    for (const path of ["/denied/x", "/allowed/x"]) {
      const response = await get(path);
      expect(response.status).toBe(403);
      expect(await errorCode(response)).toBe("CLAWGATE_IP_DENIED");
    }
    expect(echo.hits.length).toBe(before);
  });

  it("sets and removes request and response headers", async () => {
    const response = await get("/headers/t", { "x-drop": "gone", "x-keep": "kept" });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-served-by")).toBe("clawgate");
    expect(response.headers.get("x-internal")).toBeNull();
    const upstream = seen.find((request) => request.url === "/headers/t")!.headers;
    expect(upstream["x-added"]).toBe("yes");
    expect(upstream["x-drop"]).toBeUndefined();
    expect(upstream["x-keep"]).toBe("kept");
  });

  it("answers 413 above maxBodyBytes, declared or streamed chunked", async () => {
    const declared = await fetch(`${dp.proxyUrl}/upload/d`, {
      method: "POST",
      body: "x".repeat(2048),
      signal: AbortSignal.timeout(5_000),
    });
    expect(declared.status).toBe(413);
    expect(await errorCode(declared)).toBe("CLAWGATE_PAYLOAD_TOO_LARGE");

    const within = await fetch(`${dp.proxyUrl}/upload/w`, {
      method: "POST",
      body: "x".repeat(512),
      signal: AbortSignal.timeout(5_000),
    });
    expect(within.status).toBe(200);

    const chunked = await postChunked(`${dp.proxyUrl}/upload/c`, [1000, 1000]);
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.body).error.code).toBe("CLAWGATE_PAYLOAD_TOO_LARGE");
  });
});

/** POSTs chunks of the given sizes with Transfer-Encoding: chunked (no Content-Length). */
function postChunked(url: string, sizes: number[]): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", timeout: 5_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.on("timeout", () => req.destroy(new Error("chunked upload timed out")));
    // Each chunk goes out on its own: the gateway sees a stream, not a length.
    const send = (i: number) => {
      if (i === sizes.length) {
        req.end();
        return;
      }
      req.write("y".repeat(sizes[i]!), () => send(i + 1));
    };
    send(0);
  });
}
