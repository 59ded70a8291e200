import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import type { TLSSocket } from "node:tls";
import type { TrustedProxies } from "../config/trusted-proxies.js";
import { connectionTokens, isHopByHop } from "./hop-by-hop.js";

const TENANT_HEADER = "x-clawgate-tenant";

// Set by the proxy itself below, so the client's copies are dropped.
const REPLACED_UPSTREAM: ReadonlySet<string> = new Set([
  "host",
  "x-forwarded-for",
  "x-forwarded-proto",
  "x-forwarded-host",
  "x-request-id",
  "x-clawgate-retry",
  // Only the auth policy says who the tenant is; a client's claim is never forwarded.
  TENANT_HEADER,
  "expect",
]);

/**
 * A client's claim to a tenant under another spelling: CGI-style backends (and nginx with
 * underscores_in_headers) read x_clawgate_tenant as the same HTTP_X_CLAWGATE_TENANT, so any
 * name equal to x-clawgate-tenant once `_` reads as `-` is dropped too. Names come lower-cased.
 */
function claimsTenant(name: string): boolean {
  return (
    name.length === TENANT_HEADER.length &&
    name.includes("_") &&
    name.replaceAll("_", "-") === TENANT_HEADER
  );
}

/**
 * Claims about the original request that only a proxy in front may make: who the client was
 * (Forwarded, X-Real-IP) and what it asked for (X-Original-URL, X-Rewrite-URL, which IIS and
 * some frameworks route by, past the gateway's route match). Dropped unless the peer is one of
 * trustedProxies.
 */
const FROM_TRUSTED_PROXIES_ONLY = ["forwarded", "x-real-ip", "x-original-url", "x-rewrite-url"];
const REPLACED_FROM_UNTRUSTED: ReadonlySet<string> = new Set([
  ...REPLACED_UPSTREAM,
  ...FROM_TRUSTED_PROXIES_ONLY,
]);

// Set by the proxy itself on the response, so the upstream's copy is dropped.
const REPLACED_FOR_CLIENT: ReadonlySet<string> = new Set(["x-request-id"]);

/**
 * Writes `headers`' end-to-end entries, name then value, from the start of `out`, leaving out
 * hop-by-hop ones (`named`: the Connection header's tokens) and those in `replaced`; returns
 * how many slots it wrote.
 */
function copyEndToEnd(
  headers: IncomingHttpHeaders,
  named: ReadonlySet<string> | undefined,
  replaced: ReadonlySet<string>,
  out: string[],
  dropped: (name: string) => boolean = neverDropped,
): number {
  let n = 0;
  for (const name in headers) {
    if (replaced.has(name) || isHopByHop(name, named) || dropped(name)) continue;
    const value = headers[name];
    if (value === undefined) continue;
    if (typeof value === "string") {
      out[n++] = name;
      out[n++] = value;
    } else {
      for (const item of value) {
        out[n++] = name;
        out[n++] = item;
      }
    }
  }
  return n;
}

export interface ForwardContext {
  /** Host header sent upstream (rewrite.host or the client's). */
  readonly host: string | undefined;
  readonly requestId: string;
  /**
   * The trustedProxies setting; undefined when empty (no peer trusted, and no check made). A
   * trusted peer's X-Forwarded-For is appended to and its X-Forwarded-Proto, X-Forwarded-Host
   * and the FROM_TRUSTED_PROXIES_ONLY headers kept; anyone else's are replaced with what the
   * gateway saw, or dropped.
   */
  readonly trustedProxies: TrustedProxies | undefined;
}

/**
 * Request headers for undici as a flat [name, value, ...] list: end-to-end headers of the
 * client, then Host, X-Forwarded-For (the peer appended), X-Forwarded-Proto,
 * X-Forwarded-Host (the client's Host) and X-Request-Id.
 */
export function upstreamRequestHeaders(req: IncomingMessage, context: ForwardContext): string[] {
  const headers = req.headers;
  const named = connectionTokens(headers.connection);
  // Sized once (writing past the end still works, should a caller lack rawHeaders): the client's raw header lines bound its end-to-end ones, plus the at most 10
  // entries added below. Grown by push from empty, the list was copied twice on its way to a
  // typical 20-odd entries (about 580 B per request against about 220 B sized).
  const out: string[] = new Array((req.rawHeaders?.length ?? 0) + ADDED_ENTRIES);
  const peer = req.socket.remoteAddress;
  const trusted = context.trustedProxies?.trusts(peer) === true;
  const replaced = trusted ? REPLACED_UPSTREAM : REPLACED_FROM_UNTRUSTED;
  let n = copyEndToEnd(headers, named, replaced, out, claimsTenant);
  if (context.host !== undefined) {
    out[n++] = "host";
    out[n++] = context.host;
  }
  const priorFor = trusted ? headers["x-forwarded-for"] : undefined;
  out[n++] = "x-forwarded-for";
  out[n++] =
    typeof priorFor === "string" && priorFor !== "" ? `${priorFor}, ${peer ?? ""}` : (peer ?? "");
  // Behind a TLS-terminating load balancer, its X-Forwarded-Proto says https; the gateway's own
  // socket would say http (and the upstream would redirect in a loop).
  const priorProto = trusted ? headers["x-forwarded-proto"] : undefined;
  out[n++] = "x-forwarded-proto";
  out[n++] =
    typeof priorProto === "string" && priorProto !== ""
      ? priorProto
      : (req.socket as TLSSocket).encrypted === true
        ? "https"
        : "http";
  const priorHost = trusted ? headers["x-forwarded-host"] : undefined;
  const forwardedHost =
    typeof priorHost === "string" && priorHost !== "" ? priorHost : headers.host;
  if (forwardedHost !== undefined) {
    out[n++] = "x-forwarded-host";
    out[n++] = forwardedHost;
  }
  out[n++] = "x-request-id";
  out[n++] = context.requestId;
  // Trimmed in place (no copy): undici reads the list up to its length.
  out.length = n;
  return out;
}

function neverDropped(): boolean {
  return false;
}

/** Entries upstreamRequestHeaders adds to the client's: host and four X- headers, name and value. */
const ADDED_ENTRIES = 10;

/** Response headers for the client: the upstream's end-to-end headers plus X-Request-Id. */
export function clientResponseHeaders(headers: IncomingHttpHeaders, requestId: string): string[] {
  const named = connectionTokens(headers.connection);
  // Sized once, as upstreamRequestHeaders is: a first pass counts the entries (for-in over a
  // parsed header object walks its cached keys, allocating nothing). Grown by push from empty,
  // a typical response's list took a 19-slot store at the first push, and another copy past
  // 19 entries (about 10 headers): about 200 B, or 570 B, against 140 B sized.
  let size = 2;
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined) size += typeof value === "string" ? 2 : 2 * value.length;
  }
  const out: string[] = new Array(size);
  let n = copyEndToEnd(headers, named, REPLACED_FOR_CLIENT, out);
  out[n++] = "x-request-id";
  out[n++] = requestId;
  // Trimmed in place (no copy) past the hop-by-hop headers left out.
  out.length = n;
  return out;
}
