import type { IncomingHttpHeaders } from "node:http";
import { isAttemptFailure } from "../../errors/failure-kind.js";
import type { Exchange } from "./exchange.js";
import { logAttemptFailure } from "./failure-log.js";
import type { ProxyDeps } from "./proxy-deps.js";
import { DecoratorHandler, type Failure, type Interceptor, type StageController } from "./stage.js";

/**
 * Innermost observer: every failed attempt at a node (an error or a 5xx, retried or not) gets
 * its log line and its clawgate_upstream_errors_total count, with the node and attempt number.
 * Attempts the proxy ended itself (client gone, answered already) are not the upstream's.
 */
export function attemptLog(deps: ProxyDeps): Interceptor {
  return (next) => (exchange, handler) => {
    next(exchange, new AttemptLogHandler(handler, exchange, deps));
  };
}

class AttemptLogHandler extends DecoratorHandler {
  constructor(
    handler: AttemptLogHandler["handler"],
    private readonly exchange: Exchange,
    private readonly deps: ProxyDeps,
  ) {
    super(handler);
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (status >= 500) logAttemptFailure(this.deps, this.exchange, "status_5xx", undefined);
    this.handler.onResponseStart(controller, status, headers);
  }

  override onFailure(failure: Failure): void {
    const kind = failure.kind;
    if (isAttemptFailure(kind)) logAttemptFailure(this.deps, this.exchange, kind, failure.error);
    this.handler.onFailure(failure);
  }

  // Pass-throughs of its own: see DecoratorHandler on why (monomorphic calls per request).
  override onRequestStart(controller: StageController): void {
    this.handler.onRequestStart(controller);
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    this.handler.onResponseData(controller, chunk);
  }

  override onResponseEnd(controller: StageController): void {
    this.handler.onResponseEnd(controller);
  }
}
