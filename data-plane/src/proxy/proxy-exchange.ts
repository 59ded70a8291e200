import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Dispatcher } from "undici";
import type { CompiledNode, CompiledRoute, CompiledUpstream } from "../compiler/compiled-types.js";
import { sendError } from "../errors/error-catalog.js";
import {
  classifyUpstreamError,
  errorCodeForFailure,
  type UpstreamFailureKind,
} from "../errors/upstream-failure.js";
import type { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { clientResponseHeaders } from "./forward-headers.js";

/** Status recorded when the client went away before its response was complete (nginx's). */
export const CLIENT_CLOSED_STATUS = 499;

/** What every exchange of one handler shares. */
export interface ExchangeShared {
  readonly metrics: ProxyMetrics;
  readonly logger: Logger;
}

const kExchange = Symbol("clawgate.exchange");
type TaggedResponse = ServerResponse & { [kExchange]?: ProxyExchange };

class ClientGoneError extends Error {
  readonly code = "CLAWGATE_CLIENT_GONE";
  constructor() {
    super("client closed the connection");
  }
}

/**
 * One proxied request's state, and the undici dispatch handler for it. Listeners on the
 * client response are module-level functions that find the exchange through a symbol, so a
 * request allocates this object and no closures.
 */
export class ProxyExchange implements Dispatcher.DispatchHandler {
  #controller: Dispatcher.DispatchController | null = null;
  /** The response (or the error answer) is complete, or the client is gone. */
  #settled = false;
  #clientGone = false;
  #responseStarted = false;
  #status = 0;
  #listeningForDrain = false;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly route: CompiledRoute,
    private readonly upstream: CompiledUpstream,
    private readonly node: CompiledNode,
    private readonly requestId: string,
    private readonly startedAt: number,
    private readonly shared: ExchangeShared,
  ) {
    (res as TaggedResponse)[kExchange] = this;
    res.on("close", onClientClose);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // The client left while the request waited in the pool's queue.
    if (this.#clientGone) controller.abort(new ClientGoneError());
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    // 1xx informational answers (103 Early Hints) are not relayed; the final one follows.
    if (statusCode < 200 || this.#settled) return;
    try {
      this.res.writeHead(statusCode, clientResponseHeaders(headers, this.requestId));
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
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#settled) return;
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
    this.#settled = true;
    this.res.end();
    this.#record(this.#status);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (this.#settled) return;
    this.#settled = true;
    // A client that leaves mid-upload fails the request body stream; undici reports that as
    // the request's error, but it is the client's doing, not the upstream's.
    if (this.#clientGone || this.req.socket.destroyed) {
      this.#clientGone = true;
      this.#record(CLIENT_CLOSED_STATUS);
      this.res.destroy();
      return;
    }
    const kind = classifyUpstreamError(error);
    const code = errorCodeForFailure(kind);
    this.#logFailure(kind, error);
    if (kind !== "bad_request") this.shared.metrics.upstreamError(this.upstream.name, kind);
    if (!this.#responseStarted && !this.res.headersSent) {
      this.#record(sendError(this.res, code, this.requestId));
    } else {
      // The status line is out: appending JSON would corrupt the body, so cut the
      // connection and let the client see a truncated response.
      this.#record(this.#status);
      this.res.destroy();
    }
  }

  /** The client connection closed; abort the upstream side unless the exchange is done. */
  clientClosed(): void {
    if (this.#settled) return;
    this.#clientGone = true;
    // Aborting releases the upstream connection; without it the pool keeps a busy socket for
    // a response nobody reads. Before onRequestStart there is no controller yet: the request
    // is aborted when undici starts it.
    this.#controller?.abort(new ClientGoneError());
  }

  clientDrained(): void {
    this.#controller?.resume();
  }

  #record(status: number): void {
    const seconds = (performance.now() - this.startedAt) / 1000;
    this.shared.metrics.request(this.route.name, this.upstream.name, status, seconds);
  }

  #logFailure(kind: UpstreamFailureKind, error: Error): void {
    this.shared.logger.warn(
      {
        requestId: this.requestId,
        route: this.route.name,
        upstream: this.upstream.name,
        node: this.node.address,
        kind,
        responseStarted: this.#responseStarted,
        err: { code: (error as { code?: unknown }).code, message: error.message },
      },
      `upstream request failed: ${kind}`,
    );
  }
}

function onClientClose(this: TaggedResponse): void {
  this[kExchange]?.clientClosed();
}

function onClientDrain(this: TaggedResponse): void {
  this[kExchange]?.clientDrained();
}
