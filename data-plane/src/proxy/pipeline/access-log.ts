import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import type { AccessLogLine } from "../../access-log/access-log-line.js";
import type { AccessLogSink } from "../../access-log/access-log-sink.js";
import { type ErrorCode, errorBody } from "../../errors/error-catalog.js";
import { errorCodeForFailure, type FailureKind } from "../../errors/failure-kind.js";
import type { StaleEntry } from "../../fallback/stale-cache.js";
import { ReplayableBody } from "../../retry/replayable-body.js";
import type { Exchange } from "./exchange.js";
import { DecoratorHandler, type Failure, type Interceptor, type StageController } from "./stage.js";

/**
 * Outermost stage: writes the line once the client's answer is complete (or abandoned), from
 * what the exchange recorded on its way. Above request-metrics, so a failure of the proxy
 * itself (Exchange.top) reaches it too.
 */
export function accessLog(sink: AccessLogSink): Interceptor {
  return (next) => (exchange, handler) =>
    next(exchange, new AccessLogHandler(handler, exchange, sink));
}

class AccessLogHandler extends DecoratorHandler {
  #logged = false;
  #headersAt = 0;
  #bytesOut = 0;
  #failure: FailureKind | undefined = undefined;
  #stale = false;

  constructor(
    handler: AccessLogHandler["handler"],
    private readonly exchange: Exchange,
    private readonly sink: AccessLogSink,
  ) {
    super(handler);
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    this.handler.onResponseStart(controller, status, headers);
    if (this.#headersAt === 0 && this.exchange.responseStarted) this.#headersAt = performance.now();
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    if (!this.exchange.settled) this.#bytesOut += chunk.length;
    this.handler.onResponseData(controller, chunk);
  }

  override onResponseEnd(controller: StageController): void {
    this.handler.onResponseEnd(controller);
    this.#log();
  }

  override onFailure(failure: Failure): void {
    const exchange = this.exchange;
    const answering = !exchange.settled;
    this.handler.onFailure(failure);
    if (answering) {
      this.#failure = failure.kind;
      // A catalog error went out unless the response had started or the client had left.
      if (!exchange.responseStarted && failure.kind !== "client_gone") {
        this.#bytesOut += errorBytes(errorCodeForFailure(failure.kind), exchange.requestId);
      }
    }
    this.#log();
  }

  override onStale(entry: StaleEntry, ageSeconds: number): void {
    const answering = !this.exchange.settled;
    this.handler.onStale(entry, ageSeconds);
    if (answering) {
      this.#stale = true;
      this.#failure = this.exchange.retriedAfter;
      this.#bytesOut += entry.body.length;
    }
    this.#log();
  }

  #log(): void {
    const exchange = this.exchange;
    if (this.#logged || !exchange.settled) return;
    this.#logged = true;
    const sink = this.sink;
    if (!sink.keeps(exchange.status, this.#failure !== undefined)) return;
    const line = fillBase(sink.line(), exchange.req, exchange.requestId, exchange.startedAt);
    line.route = exchange.route.name;
    line.upstream = exchange.target.upstream.name;
    line.node = exchange.node?.address;
    line.status = exchange.status;
    line.attempts = exchange.attempt;
    line.bytesIn = bodyBytesIn(exchange);
    line.bytesOut = this.#bytesOut;
    if (this.#headersAt > 0) line.headersMs = this.#headersAt - exchange.startedAt;
    line.failure = this.#failure;
    line.stale = this.#stale;
    sink.write(line);
  }
}

/**
 * The line of a request answered before the pipeline (no route, bad request, not ready): a
 * catalog error, no upstream, no attempt.
 */
export function logAnsweredEarly(
  sink: AccessLogSink,
  req: IncomingMessage,
  requestId: string,
  code: ErrorCode,
  status: number,
  route: string | undefined,
  startedAt: number,
): void {
  if (!sink.keeps(status, false)) return;
  const line = fillBase(sink.line(), req, requestId, startedAt);
  line.route = route;
  line.status = status;
  line.bytesIn = declaredLength(req);
  line.bytesOut = errorBytes(code, requestId);
  sink.write(line);
}

/** The fields every line has, from the client's request, into the sink's reset line. */
function fillBase(
  line: AccessLogLine,
  req: IncomingMessage,
  requestId: string,
  startedAt: number,
): AccessLogLine {
  const url = req.url ?? "";
  const queryAt = url.indexOf("?");
  const durationMs = performance.now() - startedAt;
  line.requestId = requestId;
  line.client = req.socket?.remoteAddress;
  line.method = req.method;
  line.host = req.headers?.host;
  line.path = queryAt < 0 ? url : url.slice(0, queryAt);
  // A catalog answer's headers and body go out together.
  line.headersMs = durationMs;
  line.durationMs = durationMs;
  return line;
}

function bodyBytesIn(exchange: Exchange): number | undefined {
  const body = exchange.body;
  if (body === null) return 0;
  // A body the gateway rewrote (include_usage) is logged as the client sent it.
  if (Buffer.isBuffer(body))
    return exchange.clientBodyBytes >= 0 ? exchange.clientBodyBytes : body.length;
  if (body instanceof ReplayableBody) return body.bytesRead;
  return declaredLength(exchange.req);
}

/** Content-Length when the client declared one; undefined for a chunked body. */
function declaredLength(req: IncomingMessage): number | undefined {
  const declared = req.headers?.["content-length"];
  if (declared === undefined)
    return req.headers?.["transfer-encoding"] === undefined ? 0 : undefined;
  const bytes = Number(declared);
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}

function errorBytes(code: ErrorCode, requestId: string): number {
  return Buffer.byteLength(errorBody(code, requestId));
}
