import type { IncomingHttpHeaders } from "node:http";
import {
  type AttemptFailureKind,
  endedByProxy,
  isAttemptFailure,
  neverReachedUpstream,
} from "../../errors/failure-kind.js";
import { backoffMs } from "../../retry/backoff.js";
import { ReplayableBody } from "../../retry/replayable-body.js";
import { retryDecision } from "../../retry/retry-decision.js";
import type { Exchange } from "./exchange.js";
import { pickAnother } from "./node-pick.js";
import type { ProxyDeps } from "./proxy-deps.js";
import {
  DecoratorHandler,
  type Dispatch,
  type Failure,
  guarded,
  type Interceptor,
  type StageController,
} from "./stage.js";

/**
 * Sends a failed attempt again, on another node, after a backoff, when `retryDecision`, the
 * upstream's retry budget and the nodes left allow; only before any response byte reached the
 * client. A 5xx to be retried is read to its end and dropped, so its connection stays reusable.
 * What a retry swallows never reaches the stages above: they see how the request ended.
 */
export function retry(deps: ProxyDeps): Interceptor {
  return (next) => (exchange, handler) => {
    exchange.healing.budget.requestStarted();
    guarded(next, exchange, new RetryHandler(handler, exchange, deps, next));
  };
}

class RetryHandler extends DecoratorHandler implements StageController {
  #done = false;
  /** A 5xx whose retry is planned: its body is read to the end and dropped. */
  #discarding = false;
  #holdsRetrySlot = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    handler: RetryHandler["handler"],
    readonly exchange: Exchange,
    private readonly deps: ProxyDeps,
    private readonly dispatch: Dispatch,
  ) {
    super(handler);
  }

  override onRequestStart(controller: StageController): void {
    if (!this.#done) this.handler.onRequestStart(controller);
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (this.#done) return;
    // A Retry-After the upstream sent is answered, not retried around (seed 004).
    if (status >= 500 && !this.exchange.coolingDown && this.#plan("status_5xx")) {
      this.#discarding = true;
      return;
    }
    this.handler.onResponseStart(controller, status, headers);
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    if (!this.#done && !this.#discarding) this.handler.onResponseData(controller, chunk);
  }

  override onResponseEnd(controller: StageController): void {
    if (this.#done) return;
    if (this.#discarding) {
      this.#discarding = false;
      this.#backoff();
      return;
    }
    this.#finish();
    this.handler.onResponseEnd(controller);
  }

  override onFailure(failure: Failure): void {
    if (this.#done) return;
    const kind = failure.kind;
    if (this.#discarding && !endedByProxy(kind)) {
      // The 5xx body broke off; the retry planned for it still stands.
      this.#discarding = false;
      this.#backoff();
      return;
    }
    if (!this.exchange.responseStarted && isAttemptFailure(kind) && this.#plan(kind)) {
      this.#backoff();
      return;
    }
    this.#finish();
    this.handler.onFailure(failure);
  }

  // ---- the backoff between attempts, as the controller the stages above may abort --------

  abort(reason: Error): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#finish();
    const kind = (reason as { kind?: unknown }).kind === "client_gone" ? "client_gone" : "aborted";
    this.handler.onFailure({ kind, error: reason });
  }

  pause(): void {}

  resume(): void {}

  retryNow(): void {
    this.#timer = undefined;
    if (!this.#done) guarded(this.dispatch, this.exchange, this);
  }

  #backoff(): void {
    this.#timer = setTimeout(onRetryTimer, backoffMs(this.exchange.attempt), this);
    // From here until the next attempt starts, aborting the request ends the backoff.
    this.handler.onRequestStart(this);
  }

  /**
   * Whether the failed attempt goes again, and if so reserves what it needs: another node and
   * a slot of the upstream's retry budget.
   */
  #plan(kind: AttemptFailureKind): boolean {
    const exchange = this.exchange;
    const route = exchange.route;
    if (exchange.attempt > route.retryAttempts) return false;
    const body = exchange.body;
    const verdict = retryDecision({
      method: exchange.method,
      failure: kind,
      attempt: exchange.attempt,
      maxAttempts: route.retryAttempts,
      retryOn: route.retryOn,
      bodyReplayable:
        body === null ||
        Buffer.isBuffer(body) ||
        (body instanceof ReplayableBody && body.replayable),
      reachedUpstream: !neverReachedUpstream(kind),
    });
    if (!verdict.retry) return false;
    const next = pickAnother(exchange);
    if (next === undefined) return false;
    // The retry budget counts retries in flight, from this decision through the backoff to
    // the end of the retry's attempt, and only those of requests the upstream already saw:
    // resending one it never got (refused, connect timeout) adds nothing to what it receives,
    // and holding those back is what turns one dead node into client errors while its peers
    // are fine.
    const budget = exchange.healing.budget;
    const upstream = exchange.target.upstream.name;
    if (this.#holdsRetrySlot) {
      budget.retryFinished();
      this.#holdsRetrySlot = false;
    }
    if (!neverReachedUpstream(kind)) {
      if (!budget.tryRetry()) {
        this.deps.logger.debug(
          { requestId: exchange.requestId, upstream, kind },
          "retry budget exhausted; not retrying",
        );
        return false;
      }
      this.#holdsRetrySlot = true;
    }
    exchange.nextNode = next;
    exchange.retriedAfter = kind;
    this.deps.healing.retryMetrics.retried(upstream, kind);
    return true;
  }

  #finish(): void {
    this.#done = true;
    const budget = this.exchange.healing.budget;
    budget.requestFinished();
    if (this.#holdsRetrySlot) budget.retryFinished();
  }
}

function onRetryTimer(retrying: RetryHandler): void {
  try {
    retrying.retryNow();
  } catch (bug) {
    retrying.exchange.failInternally(bug);
  }
}
