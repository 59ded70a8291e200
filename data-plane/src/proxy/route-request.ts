import type { IncomingMessage } from "node:http";
import { normalizePath } from "@clawgate/proto";
import type { CompiledRoute, CompiledSnapshot } from "../compiler/compiled-types.js";
import type { ErrorCode } from "../errors/error-catalog.js";
import { badHostField } from "./host-field.js";
import { unsupportedTransferCoding } from "./transfer-coding.js";

/** A request's route, its normalized path and where its query starts (-1 without one). */
export interface RoutedRequest {
  /** The snapshot matched against: the request keeps it for its whole life. */
  readonly snapshot: CompiledSnapshot;
  readonly route: CompiledRoute;
  readonly path: string;
  readonly queryAt: number;
}

/**
 * The checks and the match every request goes through, plain or WebSocket handshake, in one
 * place so the two can never route differently: a valid Host, no transfer coding but chunked
 * (501), a snapshot to serve, an origin-form target, a path that normalizes (routed and
 * forwarded normalized, so a backend cannot read "/docs/../admin" differently) and holds no ";"
 * path parameter or "#", then the route. The catalog error otherwise.
 */
export function routeRequest(
  req: IncomingMessage,
  snapshot: CompiledSnapshot | undefined,
): RoutedRequest | ErrorCode {
  const headers = req.headers;
  if (badHostField(req.rawHeaders, headers.host)) return "CLAWGATE_BAD_REQUEST";
  if (unsupportedTransferCoding(headers["transfer-encoding"])) {
    return "CLAWGATE_UNSUPPORTED_TRANSFER_CODING";
  }
  if (snapshot === undefined) return "CLAWGATE_NOT_READY";
  const url = req.url ?? "";
  // Origin-form only: absolute-form targets (forward-proxy requests) and "*" are refused.
  if (url.charCodeAt(0) !== 47 /* / */) return "CLAWGATE_BAD_REQUEST";
  const queryAt = url.indexOf("?");
  // A raw "#" starts a fragment, which origin-form has none of (RFC 9112 section 3.2.1): a
  // backend would drop what follows, the route table would not. normalizePath refuses one in
  // the path; the query gets one native scan here.
  if (queryAt >= 0 && url.indexOf("#", queryAt) >= 0) return "CLAWGATE_BAD_REQUEST";
  const path = normalizePath(queryAt < 0 ? url : url.slice(0, queryAt));
  if (typeof path !== "string") return "CLAWGATE_BAD_REQUEST";
  const route = snapshot.match(req.method ?? "GET", headers.host ?? "", path, headers);
  if (route === undefined) return "CLAWGATE_ROUTE_NOT_FOUND";
  return { snapshot, route, path, queryAt };
}
