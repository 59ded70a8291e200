import type { IncomingMessage } from "node:http";
import type { ServerHttp2Stream } from "node:http2";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import type { CompiledSnapshot } from "../../compiler/compiled-types.js";
import type { TrustedProxies } from "../../config/trusted-proxies.js";
import type { ErrorCode } from "../../errors/error-catalog.js";
import {
  type AttemptFailureKind,
  breakerOutcomeOf,
  classifyUpstreamError,
  errorCodeForFailure,
} from "../../errors/failure-kind.js";
import { NO_ROUTE, NO_UPSTREAM, type ProxyMetrics } from "../../metrics/proxy-metrics.js";
import type { PolicyAnswer, PolicyRequest, PolicyServices } from "../../policy/policy.js";
import { runRequestPolicies } from "../../policy/run-policies.js";
import type { PoolRegistry } from "../../upstream/pool-registry.js";
import { upstreamRequestHeaders } from "../forward-headers.js";
import { scopedCooldownCheck } from "../pipeline/cooldown.js";
import { pickNode } from "../pipeline/node-pick.js";
import type { RequestHealing } from "../request-healing.js";
import { createRequestIdSource, incomingRequestId } from "../request-id.js";
import { upstreamPath } from "../rewrite-path.js";
import { routeRequest } from "../route-request.js";
import { http2HandshakeClient } from "./h2-handshake-client.js";
import { type HandshakeClient, http1HandshakeClient } from "./handshake-client.js";
import type { Tunnels } from "./tunnels.js";
import { UpgradeAttempt } from "./upgrade-attempt.js";

export interface UpgradeHandlerOptions {
  current: () => CompiledSnapshot | undefined;
  pools: PoolRegistry;
  metrics: ProxyMetrics;
  healing: RequestHealing;
  tunnels: Tunnels;
  logger: Logger;
  /**
   * What the route's policies draw on, the same object as the request pipeline's (fleet-wide
   * leases, tenant metrics), so a handshake spends a tenant's budget like any request; default
   * only the healing clock (budgets then not held on handshakes).
   */
  services?: PolicyServices;
  /** As the proxy handler's: peers whose forwarding headers are kept; default none. */
  trustedProxies?: TrustedProxies | undefined;
}

/**
 * The node:http 'upgrade' listener of the proxy port: a WebSocket handshake is routed like any
 * request (same host and path checks, same route table), passes the upstream's Retry-After
 * cooldown and breaker, goes to the next node of the picker through the node's pool (so an
 * upstream's TLS settings apply: wss), and on 101 the two sockets become a tunnel. The breaker
 * and passive health learn the handshake's outcome; the tunnel's life teaches them nothing.
 * Not retried: a handshake is a GET, but the client may already have sent frames behind it.
 *
 * The TLS listener hands an HTTP/2 extended CONNECT (RFC 8441) to the same listener, with the
 * HTTP/1.1 handshake's header view and its stream in place of a socket (see
 * tls-listener/extended-connect.ts): it is sent to the node as an HTTP/1.1 Upgrade, and the
 * client reads 200 on its stream where an HTTP/1.1 client reads 101.
 */
export function createUpgradeHandler(
  options: UpgradeHandlerOptions,
): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
  const { current, pools, metrics, healing, tunnels, logger } = options;
  const trustedProxies = options.trustedProxies;
  const services: PolicyServices = options.services ?? { clock: healing.clock };
  const nextRequestId = createRequestIdSource();

  return function onUpgrade(req, socket, head) {
    const startedAt = performance.now();
    const requestId = incomingRequestId(req.headers["x-request-id"]) ?? nextRequestId();
    // A client that resets mid-handshake must not crash the process.
    socket.on("error", () => socket.destroy());
    const client =
      req.httpVersionMajor === 2
        ? http2HandshakeClient(socket as ServerHttp2Stream)
        : http1HandshakeClient(socket);
    try {
      upgrade(req, client, head, requestId, startedAt);
    } catch (error) {
      logger.error({ requestId, err: { message: (error as Error).message } }, "upgrade failed");
      refuse(client, "CLAWGATE_INTERNAL", requestId, NO_ROUTE, NO_UPSTREAM, startedAt);
    }
  };

  function refuse(
    client: HandshakeClient,
    code: ErrorCode,
    requestId: string,
    route: string,
    upstream: string,
    startedAt: number,
    retryAfterMs?: number,
  ): number {
    const status = client.refuse(code, requestId, retryAfterMs);
    metrics.request(route, upstream, status, (performance.now() - startedAt) / 1000);
    return status;
  }

  function upgrade(
    req: IncomingMessage,
    client: HandshakeClient,
    head: Buffer,
    requestId: string,
    startedAt: number,
  ): void {
    const headers = req.headers;
    const socket: Duplex = client.stream;
    // RFC 6455 section 4.1: the handshake is a GET. Another method would be matched under its
    // own (a HEAD-only route) and then sent to the node as a GET (review 20c, Medium 3).
    if (headers.upgrade?.toLowerCase() !== "websocket" || req.method !== "GET") {
      refuse(client, "CLAWGATE_BAD_REQUEST", requestId, NO_ROUTE, NO_UPSTREAM, startedAt);
      return;
    }
    const routed = routeRequest(req, current());
    if (typeof routed === "string") {
      refuse(client, routed, requestId, NO_ROUTE, NO_UPSTREAM, startedAt);
      return;
    }
    const { snapshot, route, path, queryAt } = routed;
    const url = req.url ?? "";
    const target = route.pickTarget();
    if (target === undefined) {
      refuse(client, "CLAWGATE_NO_HEALTHY_NODE", requestId, route.name, NO_UPSTREAM, startedAt);
      return;
    }
    const chosen = target;
    const upstream = target.upstream.name;
    healing.syncWith(snapshot);
    const record = healing.upstream(upstream)!;
    const policies = route.policies;
    const end = (code: ErrorCode, retryAfterMs?: number) => {
      const status = refuse(client, code, requestId, route.name, upstream, startedAt, retryAfterMs);
      settled(status);
    };
    // The policies learn how the handshake ended (clawgate_tenant_requests_total by code).
    const settled = (status: number) => {
      for (const policy of policies) policy.onComplete?.(policyRequest, status, services);
    };

    const forwarded = upstreamRequestHeaders(req, {
      host:
        route.rewriteHost ??
        (target.upstream.hostRewrite ? target.upstream.hostName : headers.host),
      requestId,
      trustedProxies,
    });
    // The route's policies hold for a handshake as for any request: no tunnel without a key.
    const policyRequest: PolicyRequest = {
      req,
      requestId,
      tenantKeys: snapshot.tenantKeys,
      headers: forwarded,
      tenant: undefined,
    };
    const verdict =
      policies.length === 0 ? undefined : runRequestPolicies(policies, policyRequest, services);
    if (verdict instanceof Promise) {
      // A policy waits for a fleet share (a few ms); a client gone meanwhile is not forwarded.
      verdict.then(
        (answer) => {
          if (socket.destroyed) return;
          afterPolicies(answer);
        },
        () => end("CLAWGATE_INTERNAL"),
      );
    } else afterPolicies(verdict);

    function afterPolicies(answer: PolicyAnswer | undefined): void {
      if (answer !== undefined) {
        // A policy's own answer (a CORS preflight) is no handshake: refused like one.
        if (answer.kind === "error") end(answer.code, answer.retryAfterMs);
        else end("CLAWGATE_BAD_REQUEST");
        return;
      }
      connect(chosen);
    }

    function connect(target: NonNullable<typeof chosen>): void {
      const scope = target.upstream.retryAfterScope;
      if (!scopedCooldownCheck(record, scope, policyRequest.tenant?.name).ok) {
        healing.breakerMetrics.retryAfterSkip(upstream);
        metrics.upstreamError(upstream, "retry_after");
        end("CLAWGATE_UPSTREAM_COOLDOWN");
        return;
      }
      const permit = record.breaker.acquire();
      if (!permit.ok) {
        healing.breakerMetrics.rejected(upstream);
        metrics.upstreamError(upstream, "breaker_open");
        end("CLAWGATE_BREAKER_OPEN");
        return;
      }
      const node = pickNode(record);
      if (node === undefined) {
        record.breaker.release(permit);
        metrics.upstreamError(upstream, "no_healthy_node");
        end("CLAWGATE_NO_HEALTHY_NODE");
        return;
      }

      const failed = (kind: AttemptFailureKind, error?: Error) => {
        const outcome = breakerOutcomeOf(kind);
        if (outcome === undefined) record.breaker.release(permit);
        else record.breaker.record(permit, outcome);
        if (kind === "refused") healing.reportRefused(node.upstream, node.address);
        metrics.upstreamError(upstream, kind);
        logger.warn(
          { requestId, route: route.name, upstream, node: node.address, kind, err: error?.message },
          `websocket handshake failed: ${kind}`,
        );
        end(errorCodeForFailure(kind));
      };

      let pool: ReturnType<PoolRegistry["get"]>;
      try {
        // An http2 upstream's handshakes go over HTTP/1.1 (PoolSettings.http1).
        const settings = target.poolSettings;
        pool = pools.get(node.address, settings.http1 ?? settings);
      } catch {
        record.breaker.release(permit);
        end("CLAWGATE_NO_HEALTHY_NODE"); // only after pools.close(): shutting down
        return;
      }
      let answeredStatus = 0;
      const attempt = new UpgradeAttempt(client, requestId, {
        upgraded(answered, upstreamSocket) {
          record.breaker.record(permit, "success");
          if (socket.destroyed) {
            upstreamSocket.destroy();
            return;
          }
          client.accept(answered, requestId);
          const status = client.acceptedStatus;
          metrics.request(route.name, upstream, status, (performance.now() - startedAt) / 1000);
          settled(status);
          tunnels.open(route.name, socket, upstreamSocket, head);
        },
        // The node said no (401, 403, 404, 426...): the client reads its answer, and the breaker
        // judges it as it judges any response: a 5xx is the node failing, the rest is the node
        // working and refusing this handshake.
        answered(status) {
          answeredStatus = status;
          record.breaker.record(permit, status >= 500 ? "status_5xx" : "success");
        },
        relayed() {
          metrics.request(
            route.name,
            upstream,
            answeredStatus,
            (performance.now() - startedAt) / 1000,
          );
          settled(answeredStatus);
        },
        failed(error, clientLeft) {
          if (answeredStatus !== 0) {
            // Its status went out already; the breaker learned it then.
            metrics.request(
              route.name,
              upstream,
              answeredStatus,
              (performance.now() - startedAt) / 1000,
            );
            return;
          }
          if (clientLeft) {
            record.breaker.release(permit);
            return;
          }
          failed(classifyUpstreamError(error), error);
        },
      });
      attempt.boundBy(route.totalTimeoutMs);
      pool.dispatch(
        {
          path: upstreamPath(route, path, queryAt < 0 ? "" : url.slice(queryAt)),
          method: "GET",
          upgrade: "websocket",
          headers: forwarded,
          // The route's headersMs, as for any request (undici's default is 300 s).
          headersTimeout: route.headersTimeoutMs,
        },
        attempt,
      );
    }
  }
}
