import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { AccessLogSink } from "../../access-log/access-log-sink.js";
import { sendError } from "../../errors/error-catalog.js";
import { errorCodeForFailure, type FailureKind } from "../../errors/failure-kind.js";
import type { StaleEntry } from "../../fallback/stale-cache.js";
import { clientResponseHeaders } from "../forward-headers.js";
import { failRequest } from "../internal-error.js";
import { sendStale } from "../stale-response.js";
import { type ClientOutcome, errorBytes, logExchange } from "./access-log.js";
import type { Exchange } from "./exchange.js";
import { answered, clientGone } from "./exchange-abort.js";
import type { Failure, StageController, StageHandler } from "./stage.js";

/** Status recorded when the client went away before its response was complete (nginx's). */
export const CLIENT_CLOSED_STATUS = 499;

const kResponder = Symbol("clawgate.responder");
type TaggedResponse = ServerResponse & { [kResponder]?: ClientResponse };

/**
 * The top of the pipeline: writes what comes up to the client (the upstream's response, a
 * stale copy, or the catalog error of a failure), with backpressure, and aborts the attempt
 * in flight when the client leaves. Listeners are module-level functions, so a request
 * allocates no closures here. What it wrote is the request's access-log line, written when the
 * exchange settles (ClientOutcome).
 */
export class ClientResponse implements StageHandler, ClientOutcome {
  /** The attempt (or retry backoff) running now; undefined once the request's end came up. */
  #controller: StageController | undefined;
  #listeningForDrain = false;
  bytesOut = 0;
  headersAt = 0;
  failure: FailureKind | undefined = undefined;
  stale = false;

  constructor(
    readonly exchange: Exchange,
    private readonly logger: Logger,
    /** Where the line goes when the exchange settles; undefined when the log is off. */
    private readonly accessLog: AccessLogSink | undefined,
  ) {
    const res = exchange.res as TaggedResponse;
    res[kResponder] = this;
    res.on("close", onClientClose);
  }

  onRequestStart(controller: StageController): void {
    this.#controller = controller;
    // The client left while the attempt waited in the pool's queue.
    if (this.exchange.clientGone) controller.abort(clientGone());
  }

  onResponseStart(controller: StageController, status: number, headers: IncomingHttpHeaders): void {
    const exchange = this.exchange;
    if (exchange.settled) return;
    let sent: string[];
    try {
      sent = clientResponseHeaders(headers, exchange.requestId);
      exchange.res.writeHead(status, sent);
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
    exchange.responseStarted = true;
    exchange.status = status;
    if (exchange.staleKey !== undefined) exchange.sentHeaders = sent;
    if (this.accessLog !== undefined && this.headersAt === 0) this.headersAt = performance.now();
  }

  onResponseData(controller: StageController, chunk: Buffer): void {
    const exchange = this.exchange;
    if (exchange.settled) return;
    this.bytesOut += chunk.length;
    if (!exchange.res.write(chunk)) {
      controller.pause();
      if (!this.#listeningForDrain) {
        this.#listeningForDrain = true;
        exchange.res.on("drain", onClientDrain);
      }
    }
  }

  onResponseEnd(): void {
    const exchange = this.exchange;
    this.#controller = undefined;
    if (exchange.settled) return;
    exchange.res.end();
    this.#settle(exchange.status);
  }

  onFailure(failure: Failure): void {
    const exchange = this.exchange;
    const res = exchange.res;
    if (!exchange.settled) this.failure = failure.kind;
    if (failure.kind === "internal") {
      // The catalog's 500, unless the status line was out already (then the socket is cut).
      // Counted only for the log: measuring it builds the error body a second time.
      if (this.accessLog !== undefined && !exchange.settled && !exchange.responseStarted) {
        this.bytesOut += errorBytes("CLAWGATE_INTERNAL", exchange.requestId);
      }
      const status = failRequest(exchange.req, res, exchange.requestId, failure.error, this.logger);
      if (!exchange.settled) this.#settle(status);
      // Releases the upstream side; what comes back finds the exchange settled.
      const controller = this.#controller;
      this.#controller = undefined;
      controller?.abort(answered("the proxy failed the request"));
      return;
    }
    this.#controller = undefined;
    if (exchange.settled) return;
    if (failure.kind === "client_gone") {
      this.#settle(CLIENT_CLOSED_STATUS);
      res.destroy();
      return;
    }
    if (exchange.responseStarted || res.headersSent) {
      // The status line is out: appending JSON would corrupt the body, so cut the
      // connection and let the client see a truncated response.
      this.#settle(exchange.status);
      res.destroy();
      return;
    }
    const code = failure.code ?? errorCodeForFailure(failure.kind);
    // Only for the log: a fast-failing breaker answers many of these, and with the log off
    // nothing reads the count.
    if (this.accessLog !== undefined) this.bytesOut += errorBytes(code, exchange.requestId);
    this.#settle(sendError(res, code, exchange.requestId, failure.retryAfterMs));
  }

  onStale(entry: StaleEntry, ageSeconds: number): void {
    const exchange = this.exchange;
    if (exchange.settled) return;
    this.stale = true;
    this.failure = exchange.retriedAfter;
    this.bytesOut += entry.body.length;
    this.#settle(sendStale(exchange.res, entry, ageSeconds, exchange.requestId));
  }

  /** The client connection closed; abort the upstream side unless the exchange is done. */
  clientClosed(): void {
    const exchange = this.exchange;
    if (exchange.settled) return;
    exchange.clientGone = true;
    // Aborting releases the upstream connection (or ends a retry's backoff); the failure that
    // comes back up settles the exchange as 499.
    this.#controller?.abort(clientGone());
  }

  clientDrained(): void {
    this.#controller?.resume();
  }

  #settle(status: number): void {
    const exchange = this.exchange;
    exchange.settled = true;
    exchange.status = status;
    const sink = this.accessLog;
    if (sink !== undefined) logExchange(sink, exchange, this, performance.now());
  }
}

// Listeners run outside the request listener's guard: a throw here would be an uncaught
// exception, so each one ends its own exchange instead (see Exchange.failInternally).

function onClientClose(this: TaggedResponse): void {
  const responder = this[kResponder];
  try {
    responder?.clientClosed();
  } catch (bug) {
    responder?.exchange.failInternally(bug);
  }
}

function onClientDrain(this: TaggedResponse): void {
  const responder = this[kResponder];
  try {
    responder?.clientDrained();
  } catch (bug) {
    responder?.exchange.failInternally(bug);
  }
}
