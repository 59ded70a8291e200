import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import { refusalOf } from "../../errors/body-refusal.js";
import { classifyUpstreamError } from "../../errors/failure-kind.js";
import { ReplayableBody } from "../../retry/replayable-body.js";
import { errors } from "../../upstream/undici-parts.js";
import { type DeadlineEntry, type DeadlineList, DeadlineSweep } from "./deadline-sweep.js";
import type { Exchange } from "./exchange.js";
import { ExchangeAbort } from "./exchange-abort.js";
import { failFast } from "./failure-log.js";
import { sweepKeepsHeadersDeadline } from "./headers-deadline.js";
import type { ProxyDeps } from "./proxy-deps.js";
import type { Dispatch, Failure, StageHandler } from "./stage.js";

/** Sent upstream on a retried attempt; its value is the retry's number (1 for the first). */
export const RETRY_HEADER = "x-clawgate-retry";

/**
 * The bottom of the pipeline: sends the attempt to its node's connection pool, and turns what
 * undici reports back into stage callbacks, an error into a classified Failure. `sweep` keeps
 * the headers deadlines undici is not given (headers-deadline.ts).
 */
export function sendToNode(deps: ProxyDeps, sweep = new DeadlineSweep()): Dispatch {
  const pools = deps.pools;
  return (exchange, handler) => {
    const node = exchange.node!;
    let pool: ReturnType<typeof pools.get>;
    try {
      pool = pools.get(node.address, exchange.target.poolSettings);
    } catch {
      // Only after pools.close(): the process is shutting down.
      failFast(deps, exchange, handler, "no_healthy_node", 1_000);
      return;
    }
    const retry = exchange.attempt;
    exchange.attempt = retry + 1;
    const body = exchange.body;
    const route = exchange.route;
    const headersMs = route.headersTimeoutMs;
    const bodyMs = bodyTimeoutOf(exchange);
    const sweepHeaders = sweepKeepsHeadersDeadline(headersMs, bodyMs, body !== null);
    pool.dispatch(
      {
        origin: node.origin,
        method: exchange.method,
        path: exchange.path,
        // Only a retry copies the headers, to number itself.
        headers:
          retry === 0 ? exchange.headers : [...exchange.headers, RETRY_HEADER, String(retry)],
        body: body === null ? null : asBody(body instanceof ReplayableBody ? body.attempt() : body),
        // 0 on the wire means off, and undici reads 0 as "no timeout" too.
        headersTimeout: sweepHeaders ? bodyMs : headersMs,
        bodyTimeout: bodyMs,
      },
      new NodeAttempt(exchange, handler, sweepHeaders ? headersMs : 0, sweep),
    );
  };
}

/**
 * undici's handler of one attempt: relays to the stages, classifies errors once, and keeps the
 * attempt's headers deadline when undici was not given it (a DeadlineEntry of the sweep).
 */
class NodeAttempt implements Dispatcher.DispatchHandler, DeadlineEntry {
  // DeadlineEntry's fields, owned by the sweep.
  deadline = 0;
  prev: DeadlineEntry | undefined = undefined;
  next: DeadlineEntry | undefined = undefined;
  list: DeadlineList | undefined = undefined;
  #controller: Dispatcher.DispatchController | undefined = undefined;

  constructor(
    private readonly exchange: Exchange,
    private readonly handler: StageHandler,
    /** The route's headersMs when the sweep keeps it; 0: undici does. */
    private readonly headersMs: number,
    private readonly sweep: DeadlineSweep,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // From the moment undici writes the request, as its own headers timer would run. Joined
    // before the stages see the controller: one may abort it at once, which leaves the sweep.
    if (this.headersMs > 0) {
      this.#controller = controller;
      this.sweep.add(this, this.headersMs);
    }
    this.handler.onRequestStart(controller);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    // 1xx informational answers (103 Early Hints) are not relayed; the final one follows.
    if (statusCode >= 200) {
      this.#leaveSweep();
      this.handler.onResponseStart(controller, statusCode, headers);
    } else if (this.#controller !== undefined) {
      // As undici's own timer does, a 1xx answer starts the wait for the final headers anew.
      this.sweep.add(this, this.headersMs);
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.handler.onResponseData(controller, chunk);
  }

  onResponseEnd(controller: Dispatcher.DispatchController): void {
    this.handler.onResponseEnd(controller);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.#leaveSweep();
    // undici catches what the other callbacks throw and reports it here; a throw from here
    // would escape into its socket code, so it ends this exchange instead.
    try {
      this.handler.onFailure(this.#failureOf(error));
    } catch (bug) {
      this.exchange.failInternally(bug);
    }
  }

  /**
   * No headers within headersMs: fails as undici's own headers timeout would (the same error,
   * hence the same failure kind and log line); aborting also closes the connection, as undici
   * does. Called by the sweep, which serves other requests too: it must not throw.
   */
  expired(): void {
    const controller = this.#controller;
    this.#controller = undefined;
    try {
      controller?.abort(new errors.HeadersTimeoutError());
    } catch (bug) {
      this.exchange.failInternally(bug);
    }
  }

  #leaveSweep(): void {
    if (this.#controller === undefined) return;
    this.#controller = undefined;
    this.sweep.remove(this);
  }

  #failureOf(error: Error): Failure {
    if (error instanceof ExchangeAbort) return { kind: error.kind, error };
    const exchange = this.exchange;
    // The client's body was refused as it streamed (past maxBodyBytes: 413; UTF-16/32 JSON on
    // an injectStreamUsage route: 415): the client's fault, answered with the refusal's code.
    const refusal = refusalOf(error);
    if (refusal !== undefined && !exchange.responseStarted) {
      return { kind: "rejected", code: refusal, error };
    }
    // A client that leaves mid-upload fails the request body stream; undici reports that as
    // the request's error, but it is the client's doing, not the upstream's.
    if (exchange.clientGone || exchange.req.socket.destroyed) {
      exchange.clientGone = true;
      return { kind: "client_gone", error };
    }
    const kind = classifyUpstreamError(error);
    if (!exchange.responseStarted) return { kind, error };
    // "Stream broke after N bytes" is counted apart from "headers never arrived" (seed 004).
    return { kind: kind === "body_timeout" ? "body_timeout" : "stream_broken", error };
  }
}

/**
 * undici sends any async iterable as a body (core/util isIterable): a replay, a chunked body
 * under maxBodyBytes. Its typings only list streams, so those are passed under that type.
 */
function asBody(body: Buffer | IncomingMessage | AsyncIterable<Uint8Array>): Readable | Buffer {
  return body as Readable | Buffer;
}

/**
 * undici fixes the gap allowed between body chunks before the headers arrive. An SSE client
 * (EventSource sends Accept: text/event-stream) expects a stream whose events may be minutes
 * apart: its gap is the route's streamIdleMs (when set), not bodyMs.
 */
function bodyTimeoutOf(exchange: Exchange): number {
  const route = exchange.route;
  const accept = exchange.req.headers.accept;
  if (route.streamIdleMs > 0 && accept !== undefined && accept.includes("text/event-stream"))
    return route.streamIdleMs;
  return route.bodyTimeoutMs;
}
