import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { STREAM_USAGE_BODY_LIMIT } from "../../quota/stream-usage-request.js";
import { BodyReadDeadline, type BodyReadOwner } from "./body-read-deadline.js";
import { DeadlineSweep } from "./deadline-sweep.js";
import { type Exchange, UNKNOWN_BODY_LENGTH } from "./exchange.js";
import type { ExchangeAbort } from "./exchange-abort.js";
import {
  type Dispatch,
  guarded,
  type Interceptor,
  type StageController,
  type StageHandler,
} from "./stage.js";
import { scannedForUsage } from "./stream-usage.js";
import { readThenRest } from "./streamed-body.js";

/**
 * A body a retry may have to send again, of a declared length within the replay limit, is read
 * whole before the first attempt: every attempt then sends one buffer, with no per-chunk work
 * (nginx's proxy_request_buffering, bounded). It stands before the cooldown and the breaker, so
 * a slow upload holds neither a breaker permit nor a connection to a node.
 *
 * A body of unknown length on a route with usage.injectStreamUsage, whatever its Content-Type,
 * is read the same way, up to STREAM_USAGE_BODY_LIMIT: if it ends within it, it goes on as a
 * declared one would (a buffer, so it can be rewritten and framed with a Content-Length); if it
 * grows past it, what was read and the rest go upstream as a stream, scanned so that
 * include_usage is added at its end (stream-usage.ts). `replayLimitBytes` is the replay limit of
 * such a stream on a retrying route.
 *
 * The read stands before the total-timeout stage, so it has deadlines of its own, the route's:
 * no chunk for bodyMs, or the whole read past totalMs, and the client gets 408
 * (CLAWGATE_REQUEST_TIMEOUT) with nothing sent upstream. Without them a client trickling its
 * body held the request (and its connection) until node:http's requestTimeout.
 */
export function requestBody(replayLimitBytes?: number, sweep = new DeadlineSweep()): Interceptor {
  return (next) => (exchange, handler) => {
    if (exchange.bufferBodyBytes < 0) next(exchange, handler);
    else new BodyReader(exchange, handler, next, replayLimitBytes, sweep).start();
  };
}

/** Reads one request body; the controller the client side aborts while it reads. */
class BodyReader implements StageController, BodyReadOwner {
  readonly #chunks: Buffer[] = [];
  #bytes = 0;
  #done = false;
  /** bodyMs between chunks; undefined when the route has none. */
  #gap: BodyReadDeadline | undefined;
  /** totalMs for the whole read; undefined when the route has none. */
  #total: BodyReadDeadline | undefined;
  /**
   * Bytes past which the read stops: none for a declared body (node:http ends it at its
   * length); for one of unknown length the usage limit, or the route's maxBodyBytes if lower.
   */
  readonly #readUpTo: number;
  readonly #onData = (chunk: Buffer) => {
    this.#gap?.restart();
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
    if (this.#bytes > this.#readUpTo) this.#pastLimit();
  };
  readonly #onEnd = () => this.#finish();
  readonly #onClose = () => {
    // Closed before its end: the client left mid-upload.
    if (!this.#done) this.#fail("client_gone");
  };

  constructor(
    private readonly exchange: Exchange,
    private readonly handler: StageHandler,
    private readonly next: Dispatch,
    private readonly replayLimitBytes: number | undefined,
    private readonly sweep: DeadlineSweep,
  ) {
    const maxBodyBytes = exchange.route.maxBodyBytes;
    this.#readUpTo =
      exchange.bufferBodyBytes !== UNKNOWN_BODY_LENGTH
        ? Number.POSITIVE_INFINITY
        : maxBodyBytes > 0 && maxBodyBytes < STREAM_USAGE_BODY_LIMIT
          ? maxBodyBytes
          : STREAM_USAGE_BODY_LIMIT;
  }

  start(): void {
    this.handler.onRequestStart(this);
    const route = this.exchange.route;
    if (route.bodyTimeoutMs > 0) {
      this.#gap = new BodyReadDeadline(this, route.bodyTimeoutMs, this.sweep);
    }
    if (route.totalTimeoutMs > 0) {
      this.#total = new BodyReadDeadline(this, route.totalTimeoutMs, this.sweep);
    }
    const req: IncomingMessage = this.exchange.req;
    req.on("data", this.#onData);
    req.once("end", this.#onEnd);
    req.once("close", this.#onClose);
  }

  abort(reason: Error): void {
    if (this.#done) return;
    this.#fail((reason as ExchangeAbort).kind === "client_gone" ? "client_gone" : "aborted");
  }

  pause(): void {}

  /** A deadline passed mid-read: 408, and the partial body is never sent upstream. */
  bodyTimedOut(): void {
    if (this.#done) return;
    try {
      this.#stop();
      this.#chunks.length = 0;
      // The rest of the body may still trickle in: the connection is not reused for it.
      this.exchange.res.shouldKeepAlive = false;
      this.handler.onFailure({ kind: "rejected", code: "CLAWGATE_REQUEST_TIMEOUT" });
    } catch (bug) {
      this.exchange.failInternally(bug);
    }
  }

  resume(): void {}

  #finish(): void {
    if (this.#done) return;
    this.#stop();
    const chunks = this.#chunks;
    // A body that arrived in one read is sent as it is, without a copy.
    this.exchange.body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.#bytes);
    // This reader stays the attempt's controller until undici starts it: the read chunks must
    // not be held beside the body made of them (2 MiB instead of 1 while queued for the pool).
    chunks.length = 0;
    guarded(this.next, this.exchange, this.handler);
  }

  /** A body of unknown length read past #readUpTo (within the same data event). */
  #pastLimit(): void {
    const exchange = this.exchange;
    const route = exchange.route;
    if (route.maxBodyBytes > 0 && this.#bytes > route.maxBodyBytes) {
      // As a chunked body streamed upstream is cut (limited-body.ts): 413, nothing sent.
      this.#stop();
      this.#chunks.length = 0;
      this.handler.onFailure({ kind: "rejected", code: "CLAWGATE_PAYLOAD_TOO_LARGE" });
      return;
    }
    // Too large to hold: it streams on, scanned, and include_usage is added at its end
    // (stream-usage.ts), so padding a body past the limit does not escape the token budget;
    // the route's maxBodyBytes still counts the client's bytes. Paused at once, so no chunk is
    // emitted while nobody listens; the upstream request reads the rest at its own pace, and a
    // client that leaves from here on fails that read, as with any chunked body
    // (send-to-node.ts).
    exchange.req.pause();
    this.#stop();
    // Only the upstream request reads the rest. A client answered without it (a refused
    // connection, an open breaker, no healthy node) would keep a paused HTTP/2 stream, this
    // exchange and the chunks read open until it gave up, and an HTTP/1.1 connection stalled.
    drainWhenAnswered(exchange);
    exchange.body = scannedForUsage(
      exchange,
      readThenRest(this.#chunks, exchange.req),
      this.replayLimitBytes,
    );
    guarded(this.next, exchange, this.handler);
  }

  #fail(kind: "client_gone" | "aborted"): void {
    this.#stop();
    this.#chunks.length = 0;
    if (kind === "client_gone") this.exchange.clientGone = true;
    this.handler.onFailure({ kind });
  }

  #stop(): void {
    this.#done = true;
    this.#gap?.stop();
    this.#total?.stop();
    const req = this.exchange.req;
    req.off("data", this.#onData);
    req.off("end", this.#onEnd);
    req.off("close", this.#onClose);
  }
}

/**
 * Once the client's answer is out, reads what is left of its body and lets it go, as node:http
 * does with a body nobody read, so the stream or the keep-alive connection can end. The answer
 * is out at the HTTP/2 stream's `finish` (the compat response's own `finish` waits for the
 * stream to close, which this is for) or the HTTP/1.1 response's. While the upstream request
 * still reads the body (its iterator listens for `readable`), resume() leaves it to that.
 */
function drainWhenAnswered(exchange: Exchange): void {
  const req = exchange.req;
  const res = exchange.res as ServerResponse & { stream?: Duplex };
  (res.stream ?? res).once("finish", () => {
    if (!req.readableEnded) req.resume();
  });
}
