import type { IncomingHttpHeaders } from "node:http";
import { endedByProxy } from "../../errors/failure-kind.js";
import type { StaleCache } from "../../fallback/stale-cache.js";
import { storableResponse, storedHeaders } from "../stale-response.js";
import type { Exchange } from "./exchange.js";
import { answered } from "./exchange-abort.js";
import { DecoratorHandler, type Failure, type Interceptor, type StageController } from "./stage.js";

/**
 * stale-if-error (routes' fallback.staleIfErrorSeconds, GET without credentials: the handler
 * gives those a cache key): keeps each storable 2xx, and answers a request that fails before
 * its response started (an error, a 5xx, a fail-fast) with the copy when one is fresh enough.
 * A request without a key passes straight through, and so does one the route's auth policy
 * resolved to a tenant (the key does not name the caller, so one tenant's copy would be served
 * to another, or to anonymous clients); the policy chain runs before this stage.
 */
export function staleIfError(cache: StaleCache): Interceptor {
  return (next) => (exchange, handler) => {
    if (exchange.staleKey === undefined || exchange.tenant !== undefined) next(exchange, handler);
    else next(exchange, new StaleHandler(handler, exchange, cache));
  };
}

class StaleHandler extends DecoratorHandler {
  #done = false;
  #capture: Buffer[] | undefined;
  #captureBytes = 0;

  constructor(
    handler: StaleHandler["handler"],
    private readonly exchange: Exchange,
    private readonly cache: StaleCache,
  ) {
    super(handler);
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (this.#done) return;
    if (status >= 500 && this.#serve()) {
      controller.abort(answered("served stale instead"));
      return;
    }
    this.handler.onResponseStart(controller, status, headers);
    if (
      status < 300 &&
      this.exchange.responseStarted &&
      storableResponse(headers, this.cache.maxEntryBytes)
    ) {
      this.#capture = [];
    }
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    if (this.#done) return;
    const capture = this.#capture;
    if (capture !== undefined) {
      this.#captureBytes += chunk.length;
      // Too big to keep: stream on, stop copying.
      if (this.#captureBytes > this.cache.maxEntryBytes) this.#capture = undefined;
      else capture.push(chunk);
    }
    this.handler.onResponseData(controller, chunk);
  }

  override onResponseEnd(controller: StageController): void {
    if (this.#done) return;
    this.#done = true;
    const capture = this.#capture;
    const exchange = this.exchange;
    if (capture !== undefined && exchange.sentHeaders !== undefined) {
      this.cache.set(
        exchange.staleKey!,
        exchange.status,
        storedHeaders(exchange.sentHeaders),
        Buffer.concat(capture, this.#captureBytes),
      );
    }
    this.handler.onResponseEnd(controller);
  }

  override onFailure(failure: Failure): void {
    if (this.#done) return;
    this.#done = true;
    if (!this.exchange.responseStarted && !endedByProxy(failure.kind) && this.#serve()) return;
    this.handler.onFailure(failure);
  }

  /** Answers from the cache when a fresh enough copy exists. */
  #serve(): boolean {
    const entry = this.cache.get(this.exchange.staleKey!, this.exchange.route.staleIfErrorMs);
    if (entry === undefined) return false;
    this.#done = true;
    this.handler.onStale(entry, this.cache.ageSeconds(entry));
    return true;
  }
}
