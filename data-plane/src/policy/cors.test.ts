import { describe, expect, it } from "vitest";
import { compileFor, policyRequest, run, services } from "../testing/policy-fixture.js";
import { cors } from "./cors.js";

const APP = "https://app.example";
const compile = (extra: Record<string, unknown> = {}) =>
  compileFor(cors, { cors: { allowOrigins: [APP], maxAgeSeconds: 600, ...extra } });
const preflight = (origin: string, method = "POST", headers = "content-type") =>
  policyRequest({
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": method,
      "access-control-request-headers": headers,
    },
  });

describe("cors policy", () => {
  it("answers a preflight from an allowed origin with 204 and what it asked for", () => {
    expect(run(compile(), preflight(APP))).toEqual({
      kind: "respond",
      status: 204,
      headers: {
        vary: "Origin",
        "access-control-allow-origin": APP,
        "access-control-allow-methods": "POST",
        "access-control-allow-headers": "content-type",
        "access-control-max-age": "600",
      },
    });
  });

  it("answers a preflight from another origin, or for a method not listed, without CORS headers", () => {
    expect(run(compile(), preflight("https://evil.example"))).toEqual({
      kind: "respond",
      status: 204,
      headers: { vary: "Origin" },
    });
    const listed = compile({ allowMethods: ["GET"] });
    expect(run(listed, preflight(APP, "DELETE"))).toMatchObject({ headers: { vary: "Origin" } });
    expect(run(listed, preflight(APP, "GET"))).toMatchObject({
      headers: { "access-control-allow-methods": "GET" },
    });
  });

  it("lets other requests go on and marks their responses for allowed origins", () => {
    const policy = compile({ exposeHeaders: ["x-request-id"], allowCredentials: true })!;
    const request = policyRequest({ headers: { origin: APP } });
    expect(run(policy, request)).toBeUndefined();
    const headers: Record<string, string> = { vary: "Accept" };
    policy.onResponse?.(request, 200, headers, services);
    expect(headers).toEqual({
      vary: "Accept, Origin",
      "access-control-allow-origin": APP,
      "access-control-expose-headers": "x-request-id",
      "access-control-allow-credentials": "true",
    });
    const foreign: Record<string, string> = {};
    policy.onResponse?.(
      policyRequest({ headers: { origin: "https://x.example" } }),
      200,
      foreign,
      services,
    );
    expect(foreign).toEqual({});
  });

  it("a wildcard answers any origin with *", () => {
    const policy = compileFor(cors, { cors: { allowOrigins: ["*"] } })!;
    const headers: Record<string, string> = {};
    policy.onResponse?.(
      policyRequest({ headers: { origin: "https://any.example" } }),
      200,
      headers,
      services,
    );
    expect(headers["access-control-allow-origin"]).toBe("*");
  });

  // Review 20c, Low 14: a page on any site could open a WebSocket to a cors route, with the
  // user's cookies, and read what came back.
  it("refuses a WebSocket handshake from an origin not allowed, 403 CLAWGATE_ORIGIN_DENIED", () => {
    const handshake = (headers: Record<string, string>) =>
      policyRequest({ method: "GET", headers: { upgrade: "websocket", ...headers } });
    expect(run(compile(), handshake({ origin: "https://evil.example" }))).toEqual({
      kind: "error",
      code: "CLAWGATE_ORIGIN_DENIED",
    });
    expect(
      run(compile(), handshake({ origin: "https://evil.example", upgrade: "WebSocket" })),
    ).toMatchObject({ code: "CLAWGATE_ORIGIN_DENIED" });
    expect(run(compile(), handshake({ origin: APP }))).toBeUndefined();
    expect(run(compile(), handshake({}))).toBeUndefined();
    expect(
      run(compile({ allowOrigins: ["*"] }), handshake({ origin: "https://any.example" })),
    ).toBeUndefined();
    // Not a handshake: CORS is the browser's to enforce, the request goes on.
    const plain = policyRequest({ method: "GET", headers: { origin: "https://evil.example" } });
    expect(run(compile(), plain)).toBeUndefined();
  });
});
