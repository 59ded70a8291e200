import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import type { Logger } from "pino";
import type { Dispatcher } from "undici";
import { breakerOutcomeOf } from "../breaker/breaker-outcome.js";
import type { BreakerPermit } from "../breaker/circuit-breaker.js";
import { parseRetryAfter } from "../breaker/retry-after-gate.js";
import type { CompiledNode, CompiledRoute, CompiledTarget } from "../compiler/compiled-types.js";
import { sendError } from "../errors/error-catalog.js";
import {
  classifyUpstreamError,
  type ErrorFailureKind,
  errorCodeForFailure,
  neverReachedUpstream,
  type UpstreamFailureKind,
} from "../errors/upstream-failure.js";
import type { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { backoffMs } from "../retry/backoff.js";
import { ReplayableBody } from "../retry/replayable-body.js";
import { retryDecision } from "../retry/retry-decision.js";
import type { PoolRegistry } from "../upstream/pool-registry.js";
import { clientResponseHeaders } from "./forward-headers.js";
import { failRequest } from "./internal-error.js";
import type { RequestHealing, UpstreamHealing } from "./request-healing.js";
import { sendStale, storableResponse, storedHeaders } from "./stale-response.js";

/** Status recorded when the client went away before its response was complete (nginx's). */
export const CLIENT_CLOSED_STATUS = 499;

/** Sent upstream on a retried attempt; its value is the retry's number (1 for the first). */
export const RETRY_HEADER = "x-clawgate-retry";

/** What every exchange of one handler shares. */
export interface ExchangeShared {
  readonly metrics: ProxyMetrics;
  readonly logger: Logger;
  readonly pools: PoolRegistry;
  readonly healing: RequestHealing;
  /** The first pick's skip predicate: nodes the health view says not to use. Built once. */
  readonly skipUnusable: (node: CompiledNode) => boolean;
}

/** What the request carries upstream; nothing here changes between attempts. */
export type ExchangeBody = null | IncomingMessage | ReplayableBody;

const kExchange = Symbol("clawgate.exchange");
type TaggedResponse = ServerResponse & { [kExchange]?: ProxyExchange };

/** Why the proxy itself ended an attempt; never shown to clients. */
class ExchangeAbort extends Error {
  constructor(
    readonly code:
      | "CLAWGATE_CLIENT_GONE"
      | "CLAWGATE_TOTAL_TIMEOUT"
      | "CLAWGATE_SERVED_STALE"
      | "CLAWGATE_INTERNAL",
    message: string,
  ) {
    super(message);
  }
}

/** The attempt failure kinds a retry or a breaker can act on. */
type AttemptFailure = ErrorFailureKind | "status_5xx";

/**
 * One proxied request's state, and the undici dispatch handler of each of its attempts. An
 * attempt runs the request layer in order: the upstream's Retry-After cooldown, its breaker,
 * the balancer (skipping unusable and already tried nodes), the node's pool. A failed attempt
 * is retried on another node when `retryDecision`, the upstream's budget and the nodes left
 * allow; otherwise the client gets a stale copy (routes that opt in) or a catalog error.
 *
 * Attempts never overlap: the next one starts only after the previous one's last callback, so
 * every callback belongs to the current attempt. Listeners and timers are module-level
 * functions handed this object, so a request allocates no closures on the happy path.
 */
export class ProxyExchange implements Dispatcher.DispatchHandler {
  #controller: Dispatcher.DispatchController | null = null;
  /** An attempt is dispatched and has not ended yet. */
  #inFlight = false;
  /** Set once the exchange is over; an attempt still queued in the pool aborts with it. */
  #abortReason: Error | undefined;
  /** The client's answer is complete (or abandoned); every later callback is ignored. */
  #settled = false;
  #clientGone = false;
  #responseStarted = false;
  #status = 0;
  #listeningForDrain = false;

  /** The upstream's breaker, budget and cooldown, looked up once in `start`. */
  #healing!: UpstreamHealing;
  #permit: BreakerPermit | undefined;
  #probeStartedAt = 0;
  #attempt = 0;
  #node: CompiledNode | undefined;
  #tried: CompiledNode[] | undefined;
  #nextNode: CompiledNode | undefined;
  #holdsRetrySlot = false;
  /** The last attempt's failure while a retry is planned: the request's outcome if it ends here. */
  #lastFailure: AttemptFailure | undefined;
  /** A 5xx whose retry is planned: its body is read to the end and dropped. */
  #discarding = false;
  #totalTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #capture: Buffer[] | undefined;
  #captureBytes = 0;
  #captureHeaders: string[] | undefined;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly route: CompiledRoute,
    private readonly target: CompiledTarget,
    private readonly method: string,
    /** Path and query as sent upstream. */
    private readonly path: string,
    /** Request headers for undici, flat; retries send a copy with RETRY_HEADER added. */
    private readonly headers: string[],
    private readonly body: ExchangeBody,
    /** Stale-cache key; undefined unless the route opted in and this is a GET. */
    private readonly staleKey: string | undefined,
    private readonly requestId: string,
    private readonly startedAt: number,
    private readonly shared: ExchangeShared,
  ) {
    (res as TaggedResponse)[kExchange] = this;
    res.on("close", onClientClose);
  }

  /** Runs the first attempt; the exchange drives itself from here. */
  start(): void {
    // The handler synced healing with the snapshot this target comes from, so the record exists.
    this.#healing = this.shared.healing.upstream(this.target.upstream.name)!;
    this.#healing.budget.requestStarted();
    const totalMs = this.route.totalTimeoutMs;
    if (totalMs > 0) this.#totalTimer = setTimeout(onTotalTimeout, totalMs, this);
    this.#run(undefined);
  }

  // ---- undici dispatch handler -------------------------------------------------------------

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // The exchange ended while the attempt waited in the pool's queue.
    if (this.#abortReason !== undefined) controller.abort(this.#abortReason);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    // 1xx informational answers (103 Early Hints) are not relayed; the final one follows.
    if (statusCode < 200 || this.#settled || this.#discarding) return;
    let coolingDown = false;
    if (statusCode === 429 || statusCode === 503) {
      // Binding (seed 004): nothing goes to this upstream before the time it named. An
      // HTTP-date is read against the healing clock, the one the cooldown then counts down on.
      const waitMs = parseRetryAfter(
        first(headers["retry-after"]),
        this.shared.healing.clock.now(),
      );
      if (waitMs !== undefined && waitMs > 0) {
        this.#healing.cooldown.blockFor(waitMs);
        coolingDown = true;
      }
    }
    if (statusCode >= 500) {
      this.#reportFailure("status_5xx", undefined);
      if (!coolingDown && this.#planRetry("status_5xx")) {
        // Read the short error body to its end so the connection stays reusable.
        this.#discarding = true;
        return;
      }
      this.#endPermit("status_5xx");
      if (this.#serveStale()) {
        controller.abort(new ExchangeAbort("CLAWGATE_SERVED_STALE", "served stale instead"));
        return;
      }
    }
    let sent: string[];
    try {
      sent = clientResponseHeaders(headers, this.requestId);
      this.res.writeHead(statusCode, sent);
    } catch (error) {
      // node:http refused a header the upstream sent; nothing was written to the client yet.
      controller.abort(
        Object.assign(new Error("invalid upstream response header"), {
          code: "HPE_INVALID_HEADER_TOKEN",
          cause: error,
        }),
      );
      return;
    }
    this.#responseStarted = true;
    this.#status = statusCode;
    if (
      this.staleKey !== undefined &&
      statusCode < 300 &&
      storableResponse(headers, this.shared.healing.staleCache.maxEntryBytes)
    ) {
      this.#capture = [];
      this.#captureHeaders = sent;
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#settled || this.#discarding) return;
    const capture = this.#capture;
    if (capture !== undefined) {
      this.#captureBytes += chunk.length;
      // Too big to keep: stream on, stop copying.
      if (this.#captureBytes > this.shared.healing.staleCache.maxEntryBytes)
        this.#capture = undefined;
      else capture.push(chunk);
    }
    if (!this.res.write(chunk)) {
      controller.pause();
      if (!this.#listeningForDrain) {
        this.#listeningForDrain = true;
        this.res.on("drain", onClientDrain);
      }
    }
  }

  onResponseEnd(): void {
    if (this.#settled) return;
    this.#attemptEnded();
    if (this.#discarding) {
      this.#discarding = false;
      this.#scheduleRetry();
      return;
    }
    this.#endPermit("success");
    const capture = this.#capture;
    if (capture !== undefined && this.staleKey !== undefined) {
      this.shared.healing.staleCache.set(
        this.staleKey,
        this.#status,
        storedHeaders(this.#captureHeaders!),
        Buffer.concat(capture, this.#captureBytes),
      );
    }
    this.res.end();
    this.#settle(this.#status);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    // undici catches what the other callbacks throw and reports it here; a throw from here
    // would escape into its socket code, so it ends this exchange instead.
    try {
      this.#responseError(error);
    } catch (bug) {
      this.failInternally(bug);
    }
  }

  #responseError(error: Error): void {
    if (this.#settled) return;
    this.#attemptEnded();
    // A client that leaves mid-upload fails the request body stream; undici reports that as
    // the request's error, but it is the client's doing, not the upstream's.
    if (this.#clientGone || this.req.socket.destroyed) {
      this.#clientGone = true;
      this.#settle(CLIENT_CLOSED_STATUS);
      this.res.destroy();
      return;
    }
    if (this.#discarding) {
      // The 5xx body broke off; the retry planned for it still stands.
      this.#discarding = false;
      this.#scheduleRetry();
      return;
    }
    const kind = classifyUpstreamError(error);
    if (this.#responseStarted) {
      // "Stream broke after N bytes" is counted apart from "headers never arrived" (seed 004).
      const broken = kind === "body_timeout" ? "body_timeout" : "stream_broken";
      this.#endPermit(broken);
      this.#reportFailure(broken, error);
      // The status line is out: appending JSON would corrupt the body, so cut the
      // connection and let the client see a truncated response.
      this.#settle(this.#status);
      this.res.destroy();
      return;
    }
    const node = this.#node;
    if (kind === "refused" && node !== undefined) {
      this.shared.healing.reportRefused(node.upstream, node.address);
    }
    this.#reportFailure(kind, error);
    if (this.#planRetry(kind)) {
      this.#scheduleRetry();
      return;
    }
    this.#endPermit(kind);
    this.#answerFailure(kind, undefined);
  }

  /**
   * A bug in one of this exchange's callbacks (a timer, a client event, undici's error
   * callback): the request ends with 500 or a cut connection, the process serves on.
   */
  failInternally(error: unknown): void {
    const wasSettled = this.#settled;
    const wasInFlight = this.#inFlight;
    const status = failRequest(this.req, this.res, this.requestId, error, this.shared.logger);
    try {
      if (!wasSettled) this.#settle(status);
    } catch {
      // The bookkeeping is what failed: the timers at least must not fire again.
      this.#settled = true;
      clearTimeout(this.#totalTimer);
      clearTimeout(this.#retryTimer);
    }
    if (wasInFlight) {
      try {
        this.#abort(new ExchangeAbort("CLAWGATE_INTERNAL", "the proxy failed the request"));
      } catch {
        // Nothing more to release; the client side is closed already.
      }
    }
  }

  // ---- client side -------------------------------------------------------------------------

  /** The client connection closed; abort the upstream side unless the exchange is done. */
  clientClosed(): void {
    if (this.#settled) return;
    this.#clientGone = true;
    if (this.#inFlight) {
      // Aborting releases the upstream connection; the attempt's error callback settles.
      this.#abort(new ExchangeAbort("CLAWGATE_CLIENT_GONE", "client closed the connection"));
      return;
    }
    // Waiting out a retry backoff: nothing upstream to abort.
    this.#settle(CLIENT_CLOSED_STATUS);
  }

  clientDrained(): void {
    this.#controller?.resume();
  }

  /** routes' timeouts.totalMs ran out, across every attempt and backoff. */
  totalTimedOut(): void {
    this.#totalTimer = undefined;
    if (this.#settled) return;
    const kind = this.#responseStarted ? "body_timeout" : "header_timeout";
    this.#endPermit(kind);
    this.#reportFailure(kind, undefined, true);
    const wasInFlight = this.#inFlight;
    // Answer first: the abort below calls back synchronously and must find the exchange over.
    if (this.#responseStarted || this.res.headersSent) {
      this.#settle(this.#status);
      this.res.destroy();
    } else if (!this.#serveStale()) {
      this.#settle(sendError(this.res, "CLAWGATE_UPSTREAM_TIMEOUT", this.requestId));
    }
    if (wasInFlight) {
      this.#abort(new ExchangeAbort("CLAWGATE_TOTAL_TIMEOUT", "total timeout of the route"));
    }
  }

  retryTimerFired(): void {
    this.#retryTimer = undefined;
    if (this.#settled) return;
    this.#run(this.#nextNode);
  }

  // ---- attempts ----------------------------------------------------------------------------

  /** One attempt: cooldown, breaker, node, pool, dispatch. `node` is preset on a retry. */
  #run(preset: CompiledNode | undefined): void {
    const healing = this.shared.healing;
    const upstream = this.target.upstream;
    const breaker = this.#healing.breaker;
    const gate = this.#healing.cooldown.check();
    if (!gate.ok) {
      healing.breakerMetrics.retryAfterSkip(upstream.name);
      this.#degrade("retry_after", gate.retryAfterMs);
      return;
    }
    if (this.#permit === undefined) {
      // The first attempt takes the request's one permit. The breaker guards the upstream as
      // a whole, so it learns how the request ended, not how each attempt did: a node dying
      // under load must not open it while retries on the other nodes still succeed.
      const permit = breaker.acquire();
      if (!permit.ok) {
        healing.breakerMetrics.rejected(upstream.name);
        this.#degrade("breaker_open", permit.retryAfterMs);
        return;
      }
      this.#permit = permit;
      this.#probeStartedAt = permit.probe ? performance.now() : 0;
    } else {
      // A retry: other requests may have opened the breaker meanwhile; open fails fast.
      const view = breaker.inspect();
      if (view.state === "open") {
        healing.breakerMetrics.rejected(upstream.name);
        this.#degrade("breaker_open", view.retryAfterMs);
        return;
      }
    }
    // With every node in rotation the picker runs without a per-node health check.
    const node =
      preset ??
      upstream.picker.pick(healing.anyNodeUnusable() ? this.shared.skipUnusable : undefined);
    if (node === undefined) {
      this.#degrade("no_healthy_node", 1_000);
      return;
    }
    let pool: ReturnType<PoolRegistry["get"]>;
    try {
      pool = this.shared.pools.get(node.address, this.target.poolSettings);
    } catch {
      // Only after pools.close(): the process is shutting down.
      this.#degrade("no_healthy_node", 1_000);
      return;
    }
    this.#node = node;
    this.#attempt += 1;
    this.#inFlight = true;
    this.#controller = null;
    const retry = this.#attempt - 1;
    const body = this.body;
    pool.dispatch(
      {
        origin: node.origin,
        method: this.method,
        path: this.path,
        headers: retry === 0 ? this.headers : [...this.headers, RETRY_HEADER, String(retry)],
        body: body === null ? null : body instanceof ReplayableBody ? replay(body) : body,
        // 0 on the wire means off, and undici reads 0 as "no timeout" too.
        headersTimeout: this.route.headersTimeoutMs,
        bodyTimeout: this.route.bodyTimeoutMs,
      },
      this,
    );
  }

  /**
   * Whether the failed attempt goes again, and if so reserves what it needs: another node and
   * a slot of the upstream's retry budget. Only called before any response byte reached the
   * client.
   */
  #planRetry(kind: AttemptFailure): boolean {
    const route = this.route;
    if (this.#attempt > route.retryAttempts) return false;
    const body = this.body;
    const verdict = retryDecision({
      method: this.method,
      failure: kind,
      attempt: this.#attempt,
      maxAttempts: route.retryAttempts,
      retryOn: route.retryOn,
      bodyReplayable: body === null || (body instanceof ReplayableBody && body.replayable),
      reachedUpstream: !neverReachedUpstream(kind),
    });
    if (!verdict.retry) return false;
    const upstream = this.target.upstream;
    this.#tried ??= [];
    const tried = this.#tried;
    if (this.#node !== undefined) tried.push(this.#node);
    const usable = this.shared.healing.nodeUsable;
    const next = upstream.picker.pick(
      (node) => tried.includes(node) || !usable(node.upstream, node.address),
    );
    if (next === undefined) return false;
    // The retry budget counts retries in flight, from this decision through the backoff to
    // the end of the retry's attempt, and only those of requests the upstream already saw:
    // resending one it never got (refused, connect timeout) adds nothing to what it receives,
    // and holding those back is what turns one dead node into client errors while its peers
    // are fine.
    const budget = this.#healing.budget;
    if (this.#holdsRetrySlot) {
      budget.retryFinished();
      this.#holdsRetrySlot = false;
    }
    if (!neverReachedUpstream(kind)) {
      if (!budget.tryRetry()) {
        this.shared.logger.debug(
          { requestId: this.requestId, upstream: upstream.name, kind },
          "retry budget exhausted; not retrying",
        );
        return false;
      }
      this.#holdsRetrySlot = true;
    }
    this.#nextNode = next;
    this.#lastFailure = kind;
    this.shared.healing.retryMetrics.retried(upstream.name, kind);
    return true;
  }

  #scheduleRetry(): void {
    this.#retryTimer = setTimeout(onRetryTimer, backoffMs(this.#attempt), this);
  }

  #attemptEnded(): void {
    this.#inFlight = false;
    this.#controller = null;
  }

  #abort(reason: Error): void {
    this.#abortReason = reason;
    // Before onRequestStart there is no controller: onRequestStart aborts with the reason.
    this.#controller?.abort(reason);
  }

  /** Reports the attempt's outcome to the breaker, once. */
  #endPermit(kind: AttemptFailure | "stream_broken" | "success"): void {
    const permit = this.#permit;
    if (permit === undefined) return;
    this.#permit = undefined;
    const breaker = this.#healing.breaker;
    const outcome =
      kind === "success" ? "success" : kind === "stream_broken" ? kind : breakerOutcomeOf(kind);
    if (outcome === undefined) breaker.release(permit);
    else breaker.record(permit, outcome);
    if (permit.probe) {
      this.shared.healing.breakerMetrics.probeLatency(performance.now() - this.#probeStartedAt);
    }
  }

  // ---- answers -----------------------------------------------------------------------------

  /** The upstream was not contacted (cooldown, open breaker, no node). */
  #degrade(kind: "retry_after" | "breaker_open" | "no_healthy_node", retryAfterMs: number): void {
    const upstream = this.target.upstream.name;
    this.shared.metrics.upstreamError(upstream, kind);
    // Debug, not warn: during an outage every request fails fast here, and the breaker
    // transition, the cooldown and the metric above already record it once.
    const logger = this.shared.logger;
    if (logger.isLevelEnabled("debug")) {
      logger.debug(
        { requestId: this.requestId, route: this.route.name, upstream, kind },
        `request failed fast: ${kind}`,
      );
    }
    this.#answerFailure(kind, retryAfterMs);
  }

  #answerFailure(kind: UpstreamFailureKind, retryAfterMs: number | undefined): void {
    if (this.#serveStale()) return;
    this.#settle(sendError(this.res, errorCodeForFailure(kind), this.requestId, retryAfterMs));
  }

  /** Answers from the stale-if-error cache when the route allows and a fresh enough copy exists. */
  #serveStale(): boolean {
    const key = this.staleKey;
    if (key === undefined) return false;
    const cache = this.shared.healing.staleCache;
    const entry = cache.get(key, this.route.staleIfErrorMs);
    if (entry === undefined) return false;
    this.#settle(sendStale(this.res, entry, cache.ageSeconds(entry), this.requestId));
    return true;
  }

  #settle(status: number): void {
    this.#settled = true;
    if (this.#totalTimer !== undefined) clearTimeout(this.#totalTimer);
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    const budget = this.#healing.budget;
    budget.requestFinished();
    if (this.#holdsRetrySlot) budget.retryFinished();
    // Ended before its outcome was recorded: by the last attempt's failure (a retry could not
    // go out), or with none at all (client gone), which hands the probe slot back.
    if (this.#permit !== undefined) {
      const failure = this.#clientGone ? undefined : this.#lastFailure;
      if (failure !== undefined) this.#endPermit(failure);
      else {
        this.#healing.breaker.release(this.#permit);
        this.#permit = undefined;
      }
    }
    const seconds = (performance.now() - this.startedAt) / 1000;
    this.shared.metrics.request(this.route.name, this.target.upstream.name, status, seconds);
  }

  #reportFailure(kind: UpstreamFailureKind, error: Error | undefined, total = false): void {
    const upstream = this.target.upstream.name;
    if (kind !== "bad_request") this.shared.metrics.upstreamError(upstream, kind);
    const line: Record<string, unknown> = {
      requestId: this.requestId,
      route: this.route.name,
      upstream,
      node: this.#node?.address,
      attempt: this.#attempt,
      kind,
      responseStarted: this.#responseStarted,
    };
    if (total) line.totalTimeoutMs = this.route.totalTimeoutMs;
    if (error !== undefined) {
      line.err = { code: (error as { code?: unknown }).code, message: error.message };
    }
    this.shared.logger.warn(line, `upstream request failed: ${kind}`);
  }
}

/**
 * undici sends any async iterable as a body (core/util isIterable); its typings only list
 * streams, so the replay generator is passed under the Readable type.
 */
function replay(body: ReplayableBody): Readable {
  return body.attempt() as unknown as Readable;
}

function first(value: string | string[] | undefined): string | undefined {
  return typeof value === "string" ? value : value?.[0];
}

// Listeners and timers run outside the request listener's guard: a throw here would be an
// uncaught exception, so each one ends its own exchange instead (see failInternally).

function onClientClose(this: TaggedResponse): void {
  const exchange = this[kExchange];
  try {
    exchange?.clientClosed();
  } catch (bug) {
    exchange?.failInternally(bug);
  }
}

function onClientDrain(this: TaggedResponse): void {
  const exchange = this[kExchange];
  try {
    exchange?.clientDrained();
  } catch (bug) {
    exchange?.failInternally(bug);
  }
}

function onTotalTimeout(exchange: ProxyExchange): void {
  try {
    exchange.totalTimedOut();
  } catch (bug) {
    exchange.failInternally(bug);
  }
}

function onRetryTimer(exchange: ProxyExchange): void {
  try {
    exchange.retryTimerFired();
  } catch (bug) {
    exchange.failInternally(bug);
  }
}
