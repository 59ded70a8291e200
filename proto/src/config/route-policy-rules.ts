import { isHeaderName } from "./route-rules.js";

/** What a route's `auth.tenants` may be: a key is demanded, or only checked when sent. */
export const AUTH_MODES = ["required", "optional"] as const;
export type AuthMode = (typeof AUTH_MODES)[number];

/** What an upstream's 429/503 Retry-After cools down; "node" when unset. */
export const RETRY_AFTER_SCOPES = ["node", "upstream", "tenant"] as const;
export type RetryAfterScope = (typeof RETRY_AFTER_SCOPES)[number];
export const DEFAULT_RETRY_AFTER_SCOPE: RetryAfterScope = "node";

/** CORS preflight answers may be cached this long by browsers, unless the route says. */
export const DEFAULT_CORS_MAX_AGE_SECONDS = 600;

/**
 * Request headers a route may not set or remove: the gateway writes them itself (framing,
 * Host, the tenant), and a route setting x-clawgate-tenant would let anyone pass as a tenant.
 */
const RESERVED_REQUEST: ReadonlySet<string> = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "x-clawgate-tenant",
  "x-request-id",
]);
/** Response framing stays the gateway's: a wrong length would corrupt the body. */
const RESERVED_RESPONSE: ReadonlySet<string> = new Set([
  "content-length",
  "transfer-encoding",
  "connection",
  "x-request-id",
]);

/**
 * What is wrong with a header name a transform names, or undefined. `side` says which list
 * of names the gateway keeps to itself.
 */
export function transformHeaderProblem(
  name: string,
  side: "request" | "response",
): string | undefined {
  if (name !== name.toLowerCase() || !isHeaderName(name)) {
    return `"${name}" must be a lower-case header name`;
  }
  const reserved = side === "request" ? RESERVED_REQUEST : RESERVED_RESPONSE;
  if (reserved.has(name)) return `"${name}" is set by the gateway and cannot be changed`;
  return undefined;
}

/** Header values go on the wire as written: no CR, LF or other control character but tab. */
export function isHeaderValue(value: string): boolean {
  return /^[\t\x20-\x7e\x80-\xff]*$/.test(value);
}
