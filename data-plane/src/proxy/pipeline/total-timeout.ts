import type { IncomingHttpHeaders } from "node:http";
import type { StaleEntry } from "../../fallback/stale-cache.js";
import { type DeadlineEntry, type DeadlineList, DeadlineSweep } from "./deadline-sweep.js";
import type { Exchange } from "./exchange.js";
import { answered, ExchangeAbort } from "./exchange-abort.js";
import { logAttemptFailure } from "./failure-log.js";
import type { ProxyDeps } from "./proxy-deps.js";
import {
  DecoratorHandler,
  type Failure,
  guarded,
  type Interceptor,
  type StageController,
} from "./stage.js";
import { type IdleOwner, StreamIdleWatch } from "./stream-idle.js";
import { isStreamingResponse } from "./streaming-response.js";

/**
 * How long a request may take. routes' timeouts.totalMs, across every attempt and backoff: when
 * it runs out the request fails as a header timeout (a body timeout once the response started),
 * and the attempt in flight is aborted. A streaming response outlives totalMs: from its headers
 * on, its silence is bounded instead, by streamIdleMs (a StreamIdleWatch, stream-idle.ts). It
 * stands under the breaker, which records these failures. Every route has a totalMs, so requests
 * share a deadline sweep (one timer per duration) instead of a timer each, and streams' idle
 * cuts share it too.
 */
export function totalTimeout(deps: ProxyDeps, sweep = new DeadlineSweep()): Interceptor {
  return (next) => (exchange, handler) => {
    const route = exchange.route;
    const totalMs = route.totalTimeoutMs;
    if (totalMs <= 0 && route.streamIdleMs <= 0) {
      next(exchange, handler);
      return;
    }
    const timing = new TimeoutHandler(handler, exchange, deps, sweep);
    if (totalMs > 0) sweep.add(timing, totalMs);
    guarded(next, exchange, timing);
  };
}

class TimeoutHandler extends DecoratorHandler implements DeadlineEntry, IdleOwner {
  // DeadlineEntry's fields, owned by the sweep.
  deadline = 0;
  prev: DeadlineEntry | undefined = undefined;
  next: DeadlineEntry | undefined = undefined;
  list: DeadlineList | undefined = undefined;
  #done = false;
  #controller: StageController | undefined;
  /** Set when the timeout fired before the attempt's controller arrived (pool queue). */
  #abortReason: Error | undefined;
  /** The stream's idle cut, once the response turned out to be a stream. */
  #idle: StreamIdleWatch | undefined = undefined;

  constructor(
    handler: TimeoutHandler["handler"],
    readonly exchange: Exchange,
    private readonly deps: ProxyDeps,
    private readonly sweep: DeadlineSweep,
  ) {
    super(handler);
  }

  override onRequestStart(controller: StageController): void {
    if (this.#abortReason !== undefined) {
      controller.abort(this.#abortReason);
      return;
    }
    this.#controller = controller;
    if (!this.#done) this.handler.onRequestStart(controller);
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (this.#done) return;
    // totalMs bounds the wait for a stream's headers, not its life: from here streamIdleMs
    // bounds its silence. Still not done, so the stream's end passes through.
    if (isStreamingResponse(status, headers)) {
      this.sweep.remove(this);
      const idleMs = this.exchange.route.streamIdleMs;
      if (idleMs > 0 && this.#idle === undefined) {
        this.#controller = controller;
        this.#idle = new StreamIdleWatch(this, idleMs, this.sweep);
      }
    }
    this.handler.onResponseStart(controller, status, headers);
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    if (this.#done) return;
    this.#idle?.refresh();
    this.handler.onResponseData(controller, chunk);
  }

  override onResponseEnd(controller: StageController): void {
    if (this.#finish()) this.handler.onResponseEnd(controller);
  }

  override onFailure(failure: Failure): void {
    if (this.#finish()) this.handler.onFailure(failure);
  }

  override onStale(entry: StaleEntry, ageSeconds: number): void {
    if (this.#finish()) this.handler.onStale(entry, ageSeconds);
  }

  /** The sweep found the deadline passed; it must not throw (the sweep serves others too). */
  expired(): void {
    try {
      this.#timedOut();
    } catch (bug) {
      this.exchange.failInternally(bug);
    }
  }

  /** The stream stayed silent for streamIdleMs: a body timeout, and the node released. */
  streamIdle(): void {
    if (this.#done) return;
    this.#done = true;
    this.#idle?.stop();
    logAttemptFailure(this.deps, this.exchange, "body_timeout", undefined, false);
    // Answer first: the abort below calls back synchronously and must find this stage done.
    this.handler.onFailure({ kind: "body_timeout" });
    this.#controller?.abort(
      new ExchangeAbort("aborted", "stream idle past the route's streamIdleMs"),
    );
  }

  #timedOut(): void {
    if (this.#done) return;
    this.#done = true;
    const exchange = this.exchange;
    const kind = exchange.responseStarted ? "body_timeout" : "header_timeout";
    logAttemptFailure(this.deps, exchange, kind, undefined, true);
    // Answer first: the abort below calls back synchronously and must find this stage done.
    this.handler.onFailure({ kind });
    const reason = answered("total timeout of the route");
    const controller = this.#controller;
    if (controller === undefined) this.#abortReason = reason;
    else controller.abort(reason);
  }

  /** Whether this is the request's end (not a late callback after the timeout). */
  #finish(): boolean {
    if (this.#done) return false;
    this.#done = true;
    this.sweep.remove(this);
    this.#idle?.stop();
    return true;
  }
}
