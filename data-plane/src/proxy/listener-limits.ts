import type { Server } from "node:net";
import type { ConfigProblem } from "@clawgate/runtime";
import type { DataPlaneConfig } from "../config/config-schema.js";

export type ListenerLimits = Pick<
  DataPlaneConfig,
  | "proxyKeepAliveTimeoutMs"
  | "proxyHeadersTimeoutMs"
  | "proxyRequestTimeoutMs"
  | "proxyMaxConnections"
>;

/** node:http's per-server timeouts, which its HTTP/1.1 side reads (on the TLS listener too). */
interface Http1Timeouts {
  keepAliveTimeout: number;
  headersTimeout: number;
  requestTimeout: number;
}

/**
 * What a client may hold on a proxy listener, plaintext or TLS (its HTTP/1.1 side): an idle
 * connection (keep-alive), the time to send headers and a whole request, and how many
 * connections at once. The headers timeout is its own: it followed the keep-alive timeout
 * (up to an hour), which let a client hold a connection by sending headers a byte at a time.
 * On Node 20 an idle keep-alive connection is timed by keepAliveTimeout alone, so the two need
 * no ordering.
 */
export function applyListenerLimits(server: Server, limits: ListenerLimits): void {
  const http1 = server as Server & Http1Timeouts;
  http1.keepAliveTimeout = limits.proxyKeepAliveTimeoutMs;
  http1.headersTimeout = limits.proxyHeadersTimeoutMs;
  http1.requestTimeout = limits.proxyRequestTimeoutMs;
  if (limits.proxyMaxConnections !== undefined) {
    server.maxConnections = limits.proxyMaxConnections;
  }
}

/**
 * Options of the plaintext listener's createServer. node:http looks for connections past their
 * headers or request timeout every connectionsCheckingInterval (30 s by default), so a 5 s
 * headers timeout would be kept only to within 30 s; checked twice per headers timeout instead
 * (30 s, Node's own interval, at the 60 s default).
 */
export function listenerServerOptions(limits: ListenerLimits): {
  connectionsCheckingInterval: number;
} {
  return {
    connectionsCheckingInterval: Math.min(30_000, Math.ceil(limits.proxyHeadersTimeoutMs / 2)),
  };
}

/** node:http refuses a request timeout below the headers timeout (0 turns it off). */
export function listenerLimitProblems(
  settings: ListenerLimits,
  layerOf: (field: keyof ListenerLimits) => string,
): ConfigProblem[] {
  const { proxyRequestTimeoutMs, proxyHeadersTimeoutMs } = settings;
  if (proxyRequestTimeoutMs === 0 || proxyRequestTimeoutMs >= proxyHeadersTimeoutMs) return [];
  return [
    {
      field: "proxyRequestTimeoutMs",
      value: proxyRequestTimeoutMs,
      layer: layerOf("proxyRequestTimeoutMs"),
      reason: `must be 0 or at least proxyHeadersTimeoutMs (${proxyHeadersTimeoutMs})`,
    },
  ];
}
