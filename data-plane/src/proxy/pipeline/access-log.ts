import type { IncomingMessage } from "node:http";
import type { AccessLogLine } from "../../access-log/access-log-line.js";
import type { AccessLogSink } from "../../access-log/access-log-sink.js";
import { type ErrorCode, errorBody } from "../../errors/error-catalog.js";
import type { FailureKind } from "../../errors/failure-kind.js";
import { bodyBytesIn, declaredLength } from "./body-bytes-in.js";
import type { Exchange } from "./exchange.js";

/** How the client's answer went, as the client responder saw it write the answer. */
export interface ClientOutcome {
  /**
   * Response body bytes written to the client (a catalog error's or stale copy's included);
   * a catalog error is counted only while the log is on.
   */
  readonly bytesOut: number;
  /** performance.now() when the status line went out; 0 if it never did. */
  readonly headersAt: number;
  readonly failure: FailureKind | undefined;
  /** A stale copy was served. */
  readonly stale: boolean;
}

/**
 * The line of a proxied request, written by the client responder (ClientResponse) when it
 * settles the exchange, at `settledAt` (performance.now()). The responder is where the answer
 * is written, so it knows the bytes, the status and how the request ended without a stage of
 * its own: as a stage the log cost a handler and a call level on every callback of every
 * request.
 */
export function logExchange(
  sink: AccessLogSink,
  exchange: Exchange,
  outcome: ClientOutcome,
  settledAt: number,
): void {
  if (!sink.keeps(exchange.status, outcome.failure !== undefined)) return;
  const line = fillBase(
    sink.line(),
    exchange.req,
    exchange.requestId,
    exchange.startedAt,
    settledAt,
  );
  line.route = exchange.route.name;
  line.upstream = exchange.target.upstream.name;
  line.node = exchange.node?.address;
  line.status = exchange.status;
  line.attempts = exchange.attempt;
  line.bytesIn = bodyBytesIn(exchange);
  line.bytesOut = outcome.bytesOut;
  if (outcome.headersAt > 0) line.headersMs = outcome.headersAt - exchange.startedAt;
  line.failure = outcome.failure;
  line.stale = outcome.stale;
  sink.write(line);
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
  const line = fillBase(sink.line(), req, requestId, startedAt, performance.now());
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
  endedAt: number,
): AccessLogLine {
  const url = req.url ?? "";
  const queryAt = url.indexOf("?");
  const durationMs = endedAt - startedAt;
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

/** The bytes of the catalog error `code` as sendError writes it. */
export function errorBytes(code: ErrorCode, requestId: string): number {
  return Buffer.byteLength(errorBody(code, requestId));
}
