import type { IncomingHttpHeaders } from "node:http";
import type { BreakerOutcome } from "../../breaker/breaker-outcome.js";
import type { BreakerPermit } from "../../breaker/circuit-breaker.js";
import { breakerOutcomeOf, type FailureKind } from "../../errors/failure-kind.js";
import type { Exchange } from "./exchange.js";
import { failFast } from "./failure-log.js";
import type { ProxyDeps } from "./proxy-deps.js";
import {
  DecoratorHandler,
  type Failure,
  guarded,
  type Interceptor,
  type StageController,
} from "./stage.js";
import { isStreamingResponse } from "./streaming-response.js";

/**
 * The upstream's breaker guards the upstream as a whole, so it learns how the request ended,
 * not how each attempt did: a node dying under load must not open it while retries on the
 * other nodes still succeed. This stage takes the request's one permit (an open breaker fails
 * it fast) and records the outcome that comes up past the retry stage.
 */
export function breakerPermit(deps: ProxyDeps): Interceptor {
  return (next) => (exchange, handler) => {
    const permit = exchange.healing.breaker.acquire();
    if (!permit.ok) {
      deps.healing.breakerMetrics.rejected(exchange.target.upstream.name);
      failFast(deps, exchange, handler, "breaker_open", permit.retryAfterMs);
      return;
    }
    guarded(next, exchange, new BreakerHandler(handler, exchange, deps, permit));
  };
}

/** Per retry: other requests may have opened the breaker meanwhile; open fails fast. */
export function breakerGate(deps: ProxyDeps): Interceptor {
  return (next) => (exchange, handler) => {
    if (exchange.attempt > 0) {
      const view = exchange.healing.breaker.inspect();
      if (view.state === "open") {
        deps.healing.breakerMetrics.rejected(exchange.target.upstream.name);
        failFast(deps, exchange, handler, "breaker_open", view.retryAfterMs);
        return;
      }
    }
    next(exchange, handler);
  };
}

/** Failures that can end a request between a planned retry and its attempt. */
const ENDS_PLANNED_RETRY: ReadonlySet<FailureKind> = new Set<FailureKind>([
  "breaker_open",
  "retry_after",
  "no_healthy_node",
  "aborted",
  "internal",
]);

class BreakerHandler extends DecoratorHandler {
  #permit: BreakerPermit | undefined;
  readonly #probeStartedAt: number;

  constructor(
    handler: BreakerHandler["handler"],
    private readonly exchange: Exchange,
    private readonly deps: ProxyDeps,
    permit: BreakerPermit,
  ) {
    super(handler);
    this.#permit = permit;
    this.#probeStartedAt = permit.probe ? performance.now() : 0;
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (status >= 500) this.#end("status_5xx");
    // A stream may last hours: judged by its headers, so a half-open probe slot is not held
    // for its life and the breaker closes as soon as the upstream answers well again.
    else if (isStreamingResponse(status, headers)) this.#end("success");
    this.handler.onResponseStart(controller, status, headers);
  }

  override onResponseEnd(controller: StageController): void {
    this.#end("success");
    this.handler.onResponseEnd(controller);
  }

  override onFailure(failure: Failure): void {
    this.#end(failure.kind);
    this.handler.onFailure(failure);
  }

  /** Records the request's outcome once; a failure that says nothing hands the permit back. */
  #end(kind: FailureKind | "success"): void {
    const permit = this.#permit;
    if (permit === undefined) return;
    this.#permit = undefined;
    const breaker = this.exchange.healing.breaker;
    const outcome = kind === "success" ? "success" : this.#outcomeOf(kind);
    if (outcome === undefined) breaker.release(permit);
    else breaker.record(permit, outcome);
    if (permit.probe) {
      this.deps.healing.breakerMetrics.probeLatency(performance.now() - this.#probeStartedAt);
    }
  }

  /**
   * A request whose planned retry could not go out (a cooldown, the breaker opened, the proxy
   * itself) ends with the failure that retry was for; one whose client left teaches nothing.
   */
  #outcomeOf(kind: FailureKind): BreakerOutcome | undefined {
    if (!ENDS_PLANNED_RETRY.has(kind)) return breakerOutcomeOf(kind);
    const retriedAfter = this.exchange.retriedAfter;
    return retriedAfter === undefined ? undefined : breakerOutcomeOf(retriedAfter);
  }

  // Pass-throughs of its own: see DecoratorHandler on why (monomorphic calls per request).
  override onRequestStart(controller: StageController): void {
    this.handler.onRequestStart(controller);
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    this.handler.onResponseData(controller, chunk);
  }
}
