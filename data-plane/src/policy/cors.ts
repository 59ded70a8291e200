import type { IncomingHttpHeaders } from "node:http";
import type { Cors } from "@clawgate/proto";
import type { Policy, PolicyAnswer, PolicyFactory, PolicyRequest } from "./policy.js";

/**
 * route.cors. A preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered
 * by the gateway with 204 and never reaches the upstream; an origin not allowed gets the 204
 * without CORS headers, which the browser reads as a refusal. Other requests from an allowed
 * origin go on, and their response gets Access-Control-Allow-Origin (and Expose-Headers,
 * Allow-Credentials), and so do the gateway's own error answers (401, 403, 429...). An empty
 * allowMethods or allowHeaders allows what the preflight asks.
 *
 * A WebSocket handshake is no CORS request: a browser opens one from any page, with the
 * user's cookies, and lets the page read the messages whatever the server answers. So a
 * handshake whose Origin is not allowed is refused with 403 (cross-site WebSocket hijacking);
 * one without Origin comes from no browser and goes on, as any request does.
 */
export const cors: PolicyFactory = {
  name: "cors",
  compile({ route }): Policy | undefined {
    const config = route.cors;
    if (config === undefined) return undefined;
    const rules = compileRules(config);
    return {
      name: "cors",
      onRequest(request: PolicyRequest): PolicyAnswer | undefined {
        const headers = request.req.headers;
        if (headers.upgrade !== undefined && isWebSocket(headers.upgrade)) {
          const origin = headers.origin;
          return origin === undefined || allowOrigin(rules, origin) !== undefined
            ? undefined
            : ORIGIN_DENIED;
        }
        const method = headers["access-control-request-method"];
        if (
          request.req.method !== "OPTIONS" ||
          headers.origin === undefined ||
          method === undefined
        )
          return undefined;
        return { kind: "respond", status: 204, headers: preflight(rules, headers, method) };
      },
      onResponse(request: PolicyRequest, _status: number, headers: IncomingHttpHeaders) {
        addCorsHeaders(rules, request, headers);
        return undefined;
      },
      // A 401, 403 or 429 without CORS headers reaches the page as an opaque network error:
      // the browser hides the status and the error body from the script that must react.
      onGatewayAnswer(request: PolicyRequest, headers: IncomingHttpHeaders) {
        addCorsHeaders(rules, request, headers);
      },
    };
  },
};

const ORIGIN_DENIED: PolicyAnswer = Object.freeze({
  kind: "error",
  code: "CLAWGATE_ORIGIN_DENIED",
});

/** An Upgrade header naming the WebSocket protocol, in any case. */
function isWebSocket(upgrade: string): boolean {
  return upgrade.length === 9 && upgrade.toLowerCase() === "websocket";
}

/** The CORS headers of an actual (not preflight) response to an allowed origin. */
function addCorsHeaders(rules: CorsRules, request: PolicyRequest, headers: IncomingHttpHeaders) {
  const allowed = allowOrigin(rules, request.req.headers.origin);
  if (allowed === undefined) return;
  headers["access-control-allow-origin"] = allowed;
  if (allowed !== "*") headers.vary = appendVary(headers.vary);
  if (rules.expose !== undefined) headers["access-control-expose-headers"] = rules.expose;
  if (rules.credentials) headers["access-control-allow-credentials"] = "true";
}

interface CorsRules {
  readonly any: boolean;
  readonly origins: ReadonlySet<string>;
  readonly methods: ReadonlySet<string> | undefined;
  readonly methodList: string;
  readonly headerList: string | undefined;
  readonly expose: string | undefined;
  readonly maxAge: string;
  readonly credentials: boolean;
}

function compileRules(config: Cors): CorsRules {
  return Object.freeze({
    any: config.allowOrigins.includes("*"),
    origins: new Set(config.allowOrigins),
    methods: config.allowMethods.length === 0 ? undefined : new Set(config.allowMethods),
    methodList: config.allowMethods.join(", "),
    headerList: config.allowHeaders.length === 0 ? undefined : config.allowHeaders.join(", "),
    expose: config.exposeHeaders.length === 0 ? undefined : config.exposeHeaders.join(", "),
    maxAge: String(config.maxAgeSeconds),
    credentials: config.allowCredentials,
  });
}

/** The Allow-Origin value for `origin`, or undefined when it is not allowed. */
function allowOrigin(rules: CorsRules, origin: string | undefined): string | undefined {
  if (origin === undefined) return undefined;
  if (rules.origins.has(origin)) return origin;
  // A wildcard is echoed as "*" unless credentials are on (validation forbids that pair).
  return rules.any ? "*" : undefined;
}

function preflight(
  rules: CorsRules,
  headers: IncomingHttpHeaders,
  method: string,
): Record<string, string> {
  const out: Record<string, string> = { vary: "Origin" };
  const origin = allowOrigin(rules, headers.origin);
  if (origin === undefined) return out;
  if (rules.methods !== undefined && !rules.methods.has(method)) return out;
  out["access-control-allow-origin"] = origin;
  out["access-control-allow-methods"] = rules.methods === undefined ? method : rules.methodList;
  const asked = headers["access-control-request-headers"];
  const allowHeaders = rules.headerList ?? asked;
  if (allowHeaders !== undefined && allowHeaders !== "") {
    out["access-control-allow-headers"] = allowHeaders;
  }
  out["access-control-max-age"] = rules.maxAge;
  if (rules.credentials) out["access-control-allow-credentials"] = "true";
  return out;
}

function appendVary(vary: string | undefined): string {
  if (vary === undefined || vary === "") return "Origin";
  return /(^|,)\s*origin\s*(,|$)/i.test(vary) ? vary : `${vary}, Origin`;
}
