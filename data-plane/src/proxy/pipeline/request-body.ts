import type { IncomingMessage } from "node:http";
import type { Exchange } from "./exchange.js";
import type { ExchangeAbort } from "./exchange-abort.js";
import {
  type Dispatch,
  guarded,
  type Interceptor,
  type StageController,
  type StageHandler,
} from "./stage.js";

/**
 * A body a retry may have to send again, of a declared length within the replay limit, is read
 * whole before the first attempt: every attempt then sends one buffer, with no per-chunk work
 * (nginx's proxy_request_buffering, bounded). It stands before the cooldown and the breaker, so
 * a slow upload holds neither a breaker permit nor a connection to a node.
 */
export function requestBody(): Interceptor {
  return (next) => (exchange, handler) => {
    if (exchange.bufferBodyBytes < 0) next(exchange, handler);
    else new BodyReader(exchange, handler, next).start();
  };
}

/** Reads one request body; the controller the client side aborts while it reads. */
class BodyReader implements StageController {
  readonly #chunks: Buffer[] = [];
  #bytes = 0;
  #done = false;
  readonly #onData = (chunk: Buffer) => {
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
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
  ) {}

  start(): void {
    this.handler.onRequestStart(this);
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

  resume(): void {}

  #finish(): void {
    if (this.#done) return;
    this.#stop();
    const chunks = this.#chunks;
    // A body that arrived in one read is sent as it is, without a copy.
    this.exchange.body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.#bytes);
    guarded(this.next, this.exchange, this.handler);
  }

  #fail(kind: "client_gone" | "aborted"): void {
    this.#stop();
    if (kind === "client_gone") this.exchange.clientGone = true;
    this.handler.onFailure({ kind });
  }

  #stop(): void {
    this.#done = true;
    const req = this.exchange.req;
    req.off("data", this.#onData);
    req.off("end", this.#onEnd);
    req.off("close", this.#onClose);
  }
}
