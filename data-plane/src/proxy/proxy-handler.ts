import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import { Registry } from "prom-client";
import type { AccessLogSink } from "../access-log/access-log-sink.js";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import type { TrustedProxies } from "../config/trusted-proxies.js";
import { type ErrorCode, sendError } from "../errors/error-catalog.js";
import { NO_ROUTE, NO_UPSTREAM, type ProxyMetrics } from "../metrics/proxy-metrics.js";
import type { TenantMetrics } from "../metrics/tenant-metrics.js";
import type { LeaseBook } from "../quota/lease-book.js";
import { streamUsageCandidate, streamUsageScanCandidate } from "../quota/stream-usage-request.js";
import type { PoolRegistry } from "../upstream/pool-registry.js";
import { upstreamRequestHeaders } from "./forward-headers.js";
import { failRequest } from "./internal-error.js";
import { logAnsweredEarly } from "./pipeline/access-log.js";
import { Exchange, type ExchangeBody, UNKNOWN_BODY_LENGTH } from "./pipeline/exchange.js";
import { buildPipeline } from "./pipeline/pipeline.js";
import { scannedForUsage } from "./pipeline/stream-usage.js";
import { streamedBody } from "./pipeline/streamed-body.js";
import { RequestHealing } from "./request-healing.js";
import { createRequestIdSource, incomingRequestId } from "./request-id.js";
import { upstreamPath } from "./rewrite-path.js";
import { routeRequest } from "./route-request.js";
import { carriesCredential } from "./stale-response.js";

export interface ProxyHandlerOptions {
  /** The applied compiled snapshot; read once per request. */
  current: () => CompiledSnapshot | undefined;
  pools: PoolRegistry;
  metrics: ProxyMetrics;
  logger: Logger;
  /**
   * Peers whose forwarding headers are kept (X-Forwarded-For appended to; see
   * forward-headers.ts); built once from the trustedProxies setting. Default none: every
   * client's are replaced with what the gateway saw.
   */
  trustedProxies?: TrustedProxies | undefined;
  /**
   * Breakers, Retry-After cooldowns, retry budgets and the stale cache, kept across snapshots.
   * The handler syncs it with each new snapshot it reads (a no-op when the caller synced it on
   * apply already). Default: a private one with unregistered metrics.
   */
  healing?: RequestHealing;
  /**
   * Request bodies declared (Content-Length) up to this size are read whole before the first
   * attempt on a retrying route, so a retry can send them again; a larger one streams through
   * once and is never retried. Default 64 KiB.
   */
  replayBodyLimitBytes?: number;
  /** Where each request's access-log line goes. Default: none (the log is off). */
  accessLog?: AccessLogSink;
  /** Leases on fleet-wide tenant budgets, for the policy chain; default none (not held). */
  quota?: LeaseBook;
  /** Per-tenant counters, for the policy chain; default none (not counted). */
  tenantMetrics?: TenantMetrics;
}

/**
 * The node:http request listener of the proxy port. Per request: read the compiled snapshot
 * once (the request uses that version to its end), match a route, pick the upstream (split),
 * then hand the Exchange to the pipeline (pipeline/pipeline.ts), the request layer of
 * self-healing: stale-if-error, Retry-After cooldown, breaker, total timeout, retries on other
 * nodes, smooth WRR over the nodes in rotation, the node's pool.
 */
export function createProxyHandler(
  options: ProxyHandlerOptions,
): (req: IncomingMessage, res: ServerResponse) => void {
  const { current, pools, metrics, logger, accessLog, quota, tenantMetrics } = options;
  const trustedProxies = options.trustedProxies;
  const nextRequestId = createRequestIdSource();
  const healing = options.healing ?? new RequestHealing({ registry: new Registry(), logger });
  const replayLimit = options.replayBodyLimitBytes ?? 65_536;
  const run = buildPipeline(
    Object.freeze({
      metrics,
      logger,
      pools,
      healing,
      accessLog,
      quota,
      tenantMetrics,
      replayBodyLimitBytes: replayLimit,
    }),
  );

  function answer(
    req: IncomingMessage,
    res: ServerResponse,
    code: ErrorCode,
    requestId: string,
    route: string,
    upstream: string,
    startedAt: number,
  ): void {
    const status = sendError(res, code, requestId);
    metrics.request(route, upstream, status, (performance.now() - startedAt) / 1000);
    if (accessLog !== undefined) {
      logAnsweredEarly(
        accessLog,
        req,
        requestId,
        code,
        status,
        route === NO_ROUTE ? undefined : route,
        startedAt,
      );
    }
  }

  // Shared listeners, so the guard allocates nothing per request: an 'error' event nobody
  // listens to is thrown by node and would end the process. A request stream fails whenever a
  // client leaves mid-upload (the exchange already settles that), hence debug; a response
  // stream error is a write the proxy should not have made, hence warn.
  function onRequestError(error: Error): void {
    if (logger.isLevelEnabled("debug"))
      logger.debug({ err: errorFields(error) }, "client request stream failed");
  }
  function onResponseError(error: Error): void {
    logger.warn({ err: errorFields(error) }, "client response stream failed");
  }

  /** Never throws: see failRequest. */
  return function guardedProxyRequest(req: IncomingMessage, res: ServerResponse): void {
    const startedAt = performance.now();
    let requestId = "";
    try {
      req.on("error", onRequestError);
      res.on("error", onResponseError);
      requestId = incomingRequestId(req.headers["x-request-id"]) ?? nextRequestId();
      handleProxyRequest(req, res, requestId, startedAt);
    } catch (error) {
      const status = failRequest(req, res, requestId || nextRequestId(), error, logger);
      metrics.request(NO_ROUTE, NO_UPSTREAM, status, (performance.now() - startedAt) / 1000);
    }
  };

  function handleProxyRequest(
    req: IncomingMessage,
    res: ServerResponse,
    requestId: string,
    startedAt: number,
  ): void {
    const headers = req.headers;
    const routed = routeRequest(req, current());
    if (typeof routed === "string") {
      answer(req, res, routed, requestId, NO_ROUTE, NO_UPSTREAM, startedAt);
      return;
    }
    const { snapshot, route, path, queryAt } = routed;
    const url = req.url ?? "";
    const method = req.method ?? "GET";
    const query = queryAt < 0 ? "" : url.slice(queryAt);

    const target = route.pickTarget();
    // Unreachable today: compileTargets rejects a route without targets, and an unskipped pick
    // over a non-empty list always returns one. Kept because pickTarget's type allows undefined,
    // and answering 503 beats a crash if that guarantee ever changes.
    if (target === undefined) {
      logger.warn({ requestId, route: route.name }, "route has no upstream to send to");
      answer(req, res, "CLAWGATE_NO_HEALTHY_NODE", requestId, route.name, NO_UPSTREAM, startedAt);
      return;
    }

    // A body exists only when the client framed one (RFC 9112 section 6.3).
    const contentLength = headers["content-length"];
    const chunked = headers["transfer-encoding"] !== undefined;
    let body: ExchangeBody = null;
    let bufferBodyBytes = -1;
    let scanForUsage = false;
    if (chunked || (contentLength !== undefined && contentLength !== "0")) {
      // Kept for a retry when it may be one: a declared body within the limit is read whole
      // first (one buffer every attempt sends, no per-chunk work), one of unknown length stays
      // replayable only while what was read of it fits the limit; a larger one is sent once.
      // A chunked body is cut past maxBodyBytes as it streams (streamed-body.ts).
      const declared = Number(contentLength);
      if (route.retryAttempts > 0 && !chunked && declared <= replayLimit) {
        body = req;
        bufferBodyBytes = declared;
      } else if (route.injectStreamUsage && streamUsageCandidate(headers)) {
        // A small body is read whole to add include_usage to it (stream-usage.ts), whatever its
        // Content-Type (stream-usage-request.ts says why); one of unknown length only if it ends
        // within the limit, else it streams on, scanned for it (request-body.ts).
        body = req;
        bufferBodyBytes = chunked ? UNKNOWN_BODY_LENGTH : declared;
      } else if (route.injectStreamUsage && streamUsageScanCandidate(headers)) {
        // A larger one streams upstream, scanned, and gets include_usage at its end; it needs
        // the exchange, which records that it did (below).
        body = req;
        scanForUsage = true;
      } else {
        body = chunked ? streamedBody(req, route, replayLimit) : req;
      }
    }

    // The upstream's breaker, budget, cooldown and picker are looked up by name: make sure they
    // are those of this snapshot (one comparison unless the snapshot changed).
    healing.syncWith(snapshot);
    const exchange = new Exchange(
      req,
      res,
      route,
      target,
      healing.upstream(target.upstream.name)!,
      method,
      upstreamPath(route, path, query),
      upstreamRequestHeaders(req, {
        // rewrite.host, else the upstream's own name when it asks for it, else the client's.
        host:
          route.rewriteHost ??
          (target.upstream.hostRewrite ? target.upstream.hostName : headers.host),
        requestId,
        trustedProxies,
      }),
      body,
      route.staleIfErrorMs > 0 && method === "GET" && !carriesCredential(headers)
        ? `${route.name} ${headers.host ?? ""} ${path}${query}`
        : undefined,
      requestId,
      startedAt,
      bufferBodyBytes,
      snapshot.tenantKeys,
    );
    if (scanForUsage) exchange.body = scannedForUsage(exchange, req, replayLimit);
    try {
      run(exchange);
    } catch (error) {
      // The exchange may hold a breaker permit and timers by now: it ends itself, releasing
      // them and counting the request once, under its route.
      exchange.failInternally(error);
    }
  }
}

function errorFields(error: Error): { message: string; code: unknown } {
  return { message: error.message, code: (error as { code?: unknown }).code };
}
