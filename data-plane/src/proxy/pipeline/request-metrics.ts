import type { IncomingHttpHeaders } from "node:http";
import type { StaleEntry } from "../../fallback/stale-cache.js";
import type { ProxyMetrics } from "../../metrics/proxy-metrics.js";
import type { Exchange } from "./exchange.js";
import { DecoratorHandler, type Failure, type Interceptor, type StageController } from "./stage.js";

/**
 * Outermost stage: counts each answered request once (clawgate_requests_total and its
 * duration), under the status the client got, after the handler above has answered. It is
 * also where a failure of the proxy itself enters (Exchange.top), so that one is counted too.
 */
export function requestMetrics(metrics: ProxyMetrics): Interceptor {
  return (next) => (exchange, handler) => {
    const counting = new MetricsHandler(handler, exchange, metrics);
    exchange.top = counting;
    next(exchange, counting);
  };
}

class MetricsHandler extends DecoratorHandler {
  #counted = false;

  constructor(
    handler: MetricsHandler["handler"],
    private readonly exchange: Exchange,
    private readonly metrics: ProxyMetrics,
  ) {
    super(handler);
  }

  override onResponseEnd(controller: StageController): void {
    this.handler.onResponseEnd(controller);
    this.#count();
  }

  override onFailure(failure: Failure): void {
    this.handler.onFailure(failure);
    this.#count();
  }

  override onStale(entry: StaleEntry, ageSeconds: number): void {
    this.handler.onStale(entry, ageSeconds);
    this.#count();
  }

  #count(): void {
    const exchange = this.exchange;
    if (this.#counted || !exchange.settled) return;
    this.#counted = true;
    const seconds = (performance.now() - exchange.startedAt) / 1000;
    this.metrics.request(
      exchange.route.name,
      exchange.target.upstream.name,
      exchange.status,
      seconds,
    );
  }

  // Pass-throughs of its own: see DecoratorHandler on why (monomorphic calls per request).
  override onRequestStart(controller: StageController): void {
    this.handler.onRequestStart(controller);
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    this.handler.onResponseStart(controller, status, headers);
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    this.handler.onResponseData(controller, chunk);
  }
}
