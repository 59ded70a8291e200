import { normalizePath } from "./normalize-path.js";

// Checked when config is validated only; nothing here runs per request.
const HOST = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/;
const HOST_HEADER = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;
const PATH = /^\/[^\s?#]*$/;
/** Methods are tokens; upper case because the route table compares them as sent. */
export const METHOD = /^[A-Z][A-Z0-9_-]*$/;

/**
 * True for a path or prefix the route table can match: starts with "/", no space, "?" or "#",
 * and normalizePath accepts it (a route on "/a%2Fb" could never match a request, since such a
 * request is refused).
 */
export function isRoutePath(value: string): boolean {
  return PATH.test(value) && typeof normalizePath(value) === "string";
}

export const ROUTE_PATH_RULE =
  'must start with "/", hold no space, "?", "#", "\\", control character, %2F, %5C or ' +
  'invalid %-escape, ";" (path parameter) or ".%3B" segment';

/** True for a match host: a host name (any case) or "*.suffix", without port. */
export function isRouteHost(value: string): boolean {
  const host = value.toLowerCase();
  return HOST.test(host.startsWith("*.") ? host.slice(2) : host);
}

export const ROUTE_HOST_RULE = "must be a host name or *.suffix, without port";

/** True for a header name (any case) a route may match on: an RFC 9110 token. */
export function isHeaderName(value: string): boolean {
  return HEADER_NAME.test(value.toLowerCase());
}

/** True for a Host header value a rewrite may send: host[:port] or [v6][:port]. */
export function isHostHeader(value: string): boolean {
  return HOST_HEADER.test(value);
}

/** A control character: CR, LF, NUL and the rest of C0, DEL and C1. */
export const CONTROL_CHARACTER = /\p{Cc}/u;
