import type { IncomingHttpHeaders } from "node:http";
import type { Exchange } from "./exchange.js";
import { ExchangeAbort } from "./exchange-abort.js";
import { logAttemptFailure } from "./failure-log.js";
import type { ProxyDeps } from "./proxy-deps.js";
import {
  DecoratorHandler,
  type Failure,
  guarded,
  type Interceptor,
  type StageController,
} from "./stage.js";
import { isStreamingResponse } from "./streaming-response.js";

/**
 * routes' timeouts.streamIdleMs: a streaming response (see isStreamingResponse) with no byte in
 * either direction for that long is cut as a body_timeout. Only streams get a timer, one each,
 * refreshed per chunk from the upstream and per chunk of the client's request body still
 * uploading (a duplex stream may be silent one way for long); other responses pass through
 * untouched (totalMs bounds them).
 */
export function streamIdle(deps: ProxyDeps): Interceptor {
  return (next) => (exchange, handler) => {
    if (exchange.route.streamIdleMs <= 0) {
      next(exchange, handler);
      return;
    }
    guarded(next, exchange, new StreamIdleHandler(handler, exchange, deps));
  };
}

class StreamIdleHandler extends DecoratorHandler {
  #timer: NodeJS.Timeout | undefined;
  #controller: StageController | undefined;
  #cut = false;
  /** The client's body listener; made only for a stream whose request is still uploading. */
  #refresh: (() => void) | undefined;

  constructor(
    handler: StreamIdleHandler["handler"],
    readonly exchange: Exchange,
    private readonly deps: ProxyDeps,
  ) {
    super(handler);
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (isStreamingResponse(status, headers)) {
      this.#controller = controller;
      this.#timer = setTimeout(onIdle, this.exchange.route.streamIdleMs, this);
      // The client's body, if it is still coming, keeps the stream alive too. A 'data'
      // listener only observes: undici (or the replay buffer) already reads the request.
      const req = this.exchange.req;
      if (this.exchange.body !== null && !req.readableEnded) {
        this.#refresh = () => this.#timer?.refresh();
        req.on("data", this.#refresh);
      }
    }
    this.handler.onResponseStart(controller, status, headers);
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    this.#timer?.refresh();
    this.handler.onResponseData(controller, chunk);
  }

  override onResponseEnd(controller: StageController): void {
    this.#stop();
    this.handler.onResponseEnd(controller);
  }

  override onFailure(failure: Failure): void {
    this.#stop();
    // The abort below comes back as an "aborted" failure: the cut was already reported.
    if (this.#cut && failure.error instanceof ExchangeAbort) return;
    this.handler.onFailure(failure);
  }

  /** The stream stayed silent for streamIdleMs: report a body timeout, release the node. */
  idle(): void {
    this.#stop();
    const controller = this.#controller;
    if (controller === undefined || this.#cut) return;
    this.#cut = true;
    logAttemptFailure(this.deps, this.exchange, "body_timeout", undefined, false);
    this.handler.onFailure({ kind: "body_timeout" });
    controller.abort(new ExchangeAbort("aborted", "stream idle past the route's streamIdleMs"));
  }

  #stop(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    // Most responses are no stream: they allocate no listener and have none to remove.
    if (this.#refresh !== undefined) {
      this.exchange.req.off("data", this.#refresh);
      this.#refresh = undefined;
    }
  }

  // Pass-throughs of its own: see DecoratorHandler on why (monomorphic calls per request).
  override onRequestStart(controller: StageController): void {
    this.handler.onRequestStart(controller);
  }
}

// Outside any request listener's guard: a throw ends this exchange, not the process.
function onIdle(handler: StreamIdleHandler): void {
  try {
    handler.idle();
  } catch (bug) {
    handler.exchange.failInternally(bug);
  }
}
