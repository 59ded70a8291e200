import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { type ErrorCode, sendError } from "../errors/error-catalog.js";
import { NO_ROUTE, NO_UPSTREAM, type ProxyMetrics } from "../metrics/proxy-metrics.js";
import type { PoolRegistry } from "../upstream/pool-registry.js";
import { upstreamRequestHeaders } from "./forward-headers.js";
import { ProxyExchange } from "./proxy-exchange.js";
import { createRequestIdSource, incomingRequestId } from "./request-id.js";
import { upstreamPath } from "./rewrite-path.js";

export interface ProxyHandlerOptions {
  /** The applied compiled snapshot; read once per request. */
  current: () => CompiledSnapshot | undefined;
  pools: PoolRegistry;
  metrics: ProxyMetrics;
  logger: Logger;
  /**
   * Keep the client's X-Forwarded-For and append the peer (true), or replace it with the
   * peer alone (false: for a DP that faces clients directly). Default true.
   */
  trustForwardedFor?: boolean;
}

/**
 * The node:http request listener of the proxy port. Per request: read the compiled snapshot
 * once (the request uses that version to its end), match a route, pick the upstream (split)
 * and the node by smooth WRR, and stream the exchange through the node's undici pool.
 */
export function createProxyHandler(
  options: ProxyHandlerOptions,
): (req: IncomingMessage, res: ServerResponse) => void {
  const { current, pools, metrics, logger } = options;
  const trustForwardedFor = options.trustForwardedFor ?? true;
  const nextRequestId = createRequestIdSource();
  const shared = Object.freeze({ metrics, logger });

  function answer(
    res: ServerResponse,
    code: ErrorCode,
    requestId: string,
    route: string,
    upstream: string,
    startedAt: number,
  ): void {
    const status = sendError(res, code, requestId);
    metrics.request(route, upstream, status, (performance.now() - startedAt) / 1000);
  }

  return function handleProxyRequest(req: IncomingMessage, res: ServerResponse): void {
    const startedAt = performance.now();
    const headers = req.headers;
    const requestId = incomingRequestId(headers["x-request-id"]) ?? nextRequestId();
    const snapshot = current();
    if (snapshot === undefined) {
      answer(res, "CLAWGATE_NOT_READY", requestId, NO_ROUTE, NO_UPSTREAM, startedAt);
      return;
    }

    const url = req.url ?? "";
    const method = req.method ?? "GET";
    // Origin-form only: absolute-form targets (forward-proxy requests) and "*" are refused.
    if (url.charCodeAt(0) !== 47 /* / */) {
      answer(res, "CLAWGATE_BAD_REQUEST", requestId, NO_ROUTE, NO_UPSTREAM, startedAt);
      return;
    }
    const queryAt = url.indexOf("?");
    const path = queryAt < 0 ? url : url.slice(0, queryAt);
    const query = queryAt < 0 ? "" : url.slice(queryAt);

    const route = snapshot.match(method, headers.host ?? "", path, headers);
    if (route === undefined) {
      answer(res, "CLAWGATE_ROUTE_NOT_FOUND", requestId, NO_ROUTE, NO_UPSTREAM, startedAt);
      return;
    }
    const target = route.pickTarget();
    const node = target?.upstream.picker.pick();
    if (target === undefined || node === undefined) {
      const upstream = target?.upstream.name ?? NO_UPSTREAM;
      logger.warn({ requestId, route: route.name, upstream }, "no node to send the request to");
      answer(res, "CLAWGATE_NO_HEALTHY_NODE", requestId, route.name, upstream, startedAt);
      return;
    }

    const upstream = target.upstream;
    let pool: ReturnType<PoolRegistry["get"]>;
    try {
      pool = pools.get(node.address, target.poolSettings);
    } catch {
      // Only after pools.close(): the process is shutting down.
      answer(res, "CLAWGATE_NO_HEALTHY_NODE", requestId, route.name, upstream.name, startedAt);
      return;
    }

    // A body exists only when the client framed one (RFC 9112 section 6.3).
    const contentLength = headers["content-length"];
    const hasBody =
      headers["transfer-encoding"] !== undefined ||
      (contentLength !== undefined && contentLength !== "0");

    const exchange = new ProxyExchange(
      req,
      res,
      route,
      upstream,
      node,
      requestId,
      startedAt,
      shared,
    );
    pool.dispatch(
      {
        origin: node.origin,
        method,
        path: upstreamPath(route, path, query),
        headers: upstreamRequestHeaders(req, {
          host: route.rewriteHost ?? headers.host,
          requestId,
          trustForwardedFor,
        }),
        body: hasBody ? req : null,
        // 0 on the wire means off, and undici reads 0 as "no timeout" too.
        headersTimeout: route.headersTimeoutMs,
        bodyTimeout: route.bodyTimeoutMs,
      },
      exchange,
    );
  };
}
