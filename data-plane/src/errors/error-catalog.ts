import type { ServerResponse } from "node:http";

interface CatalogEntry {
  readonly status: number;
  /** What the client reads; never upstream internals (addresses, error strings). */
  readonly message: string;
  /** Sent as Retry-After when set. */
  readonly retryAfterSeconds?: number;
}

/** Every error the data plane answers with. Clients and tests rely on these codes. */
export const errorCatalog = Object.freeze({
  CLAWGATE_BAD_REQUEST: { status: 400, message: "The request could not be forwarded." },
  CLAWGATE_UNAUTHORIZED: {
    status: 401,
    message: "A valid API key is required (x-api-key or Authorization: Bearer).",
  },
  CLAWGATE_FORBIDDEN: { status: 403, message: "This API key may not call this route." },
  CLAWGATE_WEBSOCKET_NOT_METERED: {
    status: 403,
    message: "This tenant has a token budget, which a WebSocket tunnel cannot be counted against.",
  },
  CLAWGATE_IP_DENIED: { status: 403, message: "Requests from this address are not allowed." },
  CLAWGATE_ORIGIN_DENIED: {
    status: 403,
    message: "WebSocket connections from this origin are not allowed.",
  },
  CLAWGATE_ROUTE_NOT_FOUND: { status: 404, message: "No route matches this request." },
  CLAWGATE_REQUEST_TIMEOUT: {
    status: 408,
    message: "The request body did not arrive in time.",
  },
  CLAWGATE_PAYLOAD_TOO_LARGE: {
    status: 413,
    message: "The request body is larger than this route accepts.",
  },
  CLAWGATE_UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    message: "The request body's encoding is not accepted on this route.",
  },
  CLAWGATE_RATE_LIMITED: {
    status: 429,
    message: "Too many requests for this tenant; try again later.",
    retryAfterSeconds: 1,
  },
  CLAWGATE_TOKEN_BUDGET_EXHAUSTED: {
    status: 429,
    message: "This tenant's token budget is spent until its window resets.",
    retryAfterSeconds: 1,
  },
  CLAWGATE_UNSUPPORTED_TRANSFER_CODING: {
    status: 501,
    message: "The request's Transfer-Encoding names a coding other than chunked.",
  },
  CLAWGATE_UPSTREAM_CONNECT_FAILED: {
    status: 502,
    message: "The upstream service could not be reached.",
  },
  CLAWGATE_UPSTREAM_RESET: {
    status: 502,
    message: "The upstream service closed the connection unexpectedly.",
  },
  CLAWGATE_UPSTREAM_FAILED: {
    status: 502,
    message: "The upstream service failed to answer the request.",
  },
  CLAWGATE_NOT_READY: {
    status: 503,
    message: "The gateway has no configuration yet.",
    retryAfterSeconds: 1,
  },
  CLAWGATE_NO_HEALTHY_NODE: {
    status: 503,
    message: "No healthy upstream node is available.",
    retryAfterSeconds: 1,
  },
  CLAWGATE_BREAKER_OPEN: {
    status: 503,
    message: "The upstream service is failing; requests to it are paused.",
    retryAfterSeconds: 1,
  },
  CLAWGATE_UPSTREAM_COOLDOWN: {
    status: 503,
    message: "The upstream service asked for a pause; try again later.",
    retryAfterSeconds: 1,
  },
  CLAWGATE_UPSTREAM_TIMEOUT: {
    status: 504,
    message: "The upstream service did not answer in time.",
  },
  CLAWGATE_INTERNAL: {
    status: 500,
    message: "The gateway failed to handle the request.",
  },
} satisfies Record<string, CatalogEntry>);

export type ErrorCode = keyof typeof errorCatalog;

/** The JSON body of an error answer; JSON.stringify escapes the request id. */
export function errorBody(code: ErrorCode, requestId: string): string {
  const entry: CatalogEntry = errorCatalog[code];
  return JSON.stringify({ error: { code, message: entry.message, requestId } });
}

/**
 * Answers with a catalog error. The caller must have checked that no response header was
 * sent yet; once a response has started, the only honest signal is to destroy the socket.
 *
 * @param retryAfterMs time until asking again makes sense; sent as Retry-After in whole
 *   seconds, rounded up and at least 1. Default: the catalog's own Retry-After, if any.
 */
export function sendError(
  res: ServerResponse,
  code: ErrorCode,
  requestId: string,
  retryAfterMs?: number,
): number {
  const entry: CatalogEntry = errorCatalog[code];
  const body = errorBody(code, requestId);
  const headers: Record<string, string | number> = {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
    "x-request-id": requestId,
  };
  if (retryAfterMs !== undefined) headers["retry-after"] = retryAfterSeconds(retryAfterMs);
  else if (entry.retryAfterSeconds !== undefined) headers["retry-after"] = entry.retryAfterSeconds;
  res.writeHead(entry.status, headers);
  res.end(body);
  return entry.status;
}

/** Retry-After in whole seconds for a wait in ms: rounded up, never below 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
