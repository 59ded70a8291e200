import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import type { StaleEntry } from "../fallback/stale-cache.js";

/** Marks an answer served from the stale-if-error cache. */
export const CACHE_HEADER = "x-clawgate-cache";

// Recomputed when the entry is served, so a stored copy would only be wrong.
const NOT_STORED: ReadonlySet<string> = new Set(["content-length", "age", "x-request-id"]);

/**
 * Whether a 2xx GET response may be kept for stale-if-error: not when it must not be stored
 * (no-store, private) or carries a Set-Cookie another client must never receive, not when it
 * varies by request headers (the key is route, host and URL only, so any Vary could hand one
 * client's variant to another), and not when it announces a body larger than the cache keeps.
 * Requests with credentials are never stored nor served at all: the handler gives them no key
 * (carriesCredential), and the stage passes a request the auth policy found a tenant for
 * straight through, since the key names no caller and one tenant's copy must not reach another.
 */
export function storableResponse(headers: IncomingHttpHeaders, maxBytes: number): boolean {
  if (headers["set-cookie"] !== undefined || headers.vary !== undefined) return false;
  const cacheControl = headers["cache-control"];
  if (cacheControl !== undefined && /no-store|private/i.test(cacheControl)) return false;
  const length = headers["content-length"];
  return length === undefined || Number(length) <= maxBytes;
}

/**
 * True when the request sends a credential the gateway knows of: Authorization, Cookie, or
 * x-api-key (the headers the auth policy reads a tenant's key from). The cache key names no
 * caller, so a response to one must never be served to another. Three property reads: this runs
 * on every GET of a route with stale-if-error.
 */
export function carriesCredential(headers: IncomingHttpHeaders): boolean {
  return (
    headers.authorization !== undefined ||
    headers.cookie !== undefined ||
    headers["x-api-key"] !== undefined
  );
}

/** The client-facing header list an entry keeps: what was sent, minus per-answer headers. */
export function storedHeaders(sent: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < sent.length; i += 2) {
    if (!NOT_STORED.has(sent[i]!)) kept.push(sent[i]!, sent[i + 1]!);
  }
  return kept;
}

/** Answers with a cached response, marked stale with its Age. Returns the status sent. */
export function sendStale(
  res: ServerResponse,
  entry: StaleEntry,
  ageSeconds: number,
  requestId: string,
): number {
  res.writeHead(entry.status, [
    ...entry.headers,
    "content-length",
    String(entry.body.length),
    "age",
    String(ageSeconds),
    CACHE_HEADER,
    "stale",
    "x-request-id",
    requestId,
  ]);
  res.end(entry.body);
  return entry.status;
}
