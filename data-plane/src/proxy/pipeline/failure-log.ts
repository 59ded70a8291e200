import {
  type AttemptFailureKind,
  countedFailure,
  type FailFastKind,
} from "../../errors/failure-kind.js";
import type { Exchange } from "./exchange.js";
import type { ProxyDeps } from "./proxy-deps.js";
import type { StageHandler } from "./stage.js";

/**
 * An attempt at a node failed (or the route's total timeout ran out on it): one warn line that
 * says exactly what happened, and clawgate_upstream_errors_total{kind}.
 */
export function logAttemptFailure(
  deps: ProxyDeps,
  exchange: Exchange,
  kind: AttemptFailureKind,
  error: Error | undefined,
  totalTimeout = false,
): void {
  const upstream = exchange.target.upstream.name;
  if (countedFailure(kind)) deps.metrics.upstreamError(upstream, kind);
  const line: Record<string, unknown> = {
    requestId: exchange.requestId,
    route: exchange.route.name,
    upstream,
    node: exchange.node?.address,
    attempt: exchange.attempt,
    kind,
    responseStarted: exchange.responseStarted,
  };
  if (totalTimeout) line.totalTimeoutMs = exchange.route.totalTimeoutMs;
  if (error !== undefined) {
    line.err = { code: (error as { code?: unknown }).code, message: error.message };
  }
  deps.logger.warn(line, `upstream request failed: ${kind}`);
}

/**
 * A stage answers without contacting the upstream (cooldown, open breaker, no node): counted,
 * logged at debug, and passed up as a failure with the Retry-After the client gets.
 */
export function failFast(
  deps: ProxyDeps,
  exchange: Exchange,
  handler: StageHandler,
  kind: FailFastKind,
  retryAfterMs: number,
): void {
  const upstream = exchange.target.upstream.name;
  deps.metrics.upstreamError(upstream, kind);
  // Debug, not warn: during an outage every request fails fast here, and the breaker
  // transition, the cooldown and the metric above already record it once.
  const logger = deps.logger;
  if (logger.isLevelEnabled("debug")) {
    logger.debug(
      { requestId: exchange.requestId, route: exchange.route.name, upstream, kind },
      `request failed fast: ${kind}`,
    );
  }
  handler.onFailure({ kind, retryAfterMs });
}
