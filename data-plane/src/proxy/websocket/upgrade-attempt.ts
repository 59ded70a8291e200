import type { IncomingHttpHeaders } from "node:http";
import type { Duplex } from "node:stream";
import type { Dispatcher } from "undici";
import { clientResponseHeaders } from "../forward-headers.js";
import type { HandshakeClient } from "./handshake-client.js";

/** How a handshake sent upstream ended, reported once. */
export interface UpgradeOutcome {
  /** The node switched protocols (101): the two sockets may become a tunnel. */
  upgraded(headers: IncomingHttpHeaders, upstreamSocket: Duplex): void;
  /** The node answered with an ordinary response, now being relayed to the client. */
  answered(status: number): void;
  /** That response was relayed whole and the client's socket ended. */
  relayed(): void;
  /**
   * No answer (refused, reset, timed out), or the relayed one broke midway; `clientLeft` when
   * it was the client leaving that aborted the handshake.
   */
  failed(error: Error, clientLeft: boolean): void;
}

/**
 * undici's handler of one WebSocket handshake (a request sent with `upgrade: "websocket"`).
 * undici's own upgrade() API turns any answer but 101 into a bare "bad upgrade" error, which
 * would hide the node's 401, 403 or 404 from the client; this handler relays such an answer
 * as it came (status, end-to-end headers, body) to the client, then closes its socket (or its
 * HTTP/2 stream), as Envoy and nginx do, so a client sees why the node said no.
 */
export class UpgradeAttempt implements Dispatcher.DispatchHandler {
  #status = 0;
  #settled = false;
  #clientLeft = false;
  #controller: Dispatcher.DispatchController | undefined;
  /** The route's totalMs for the whole handshake; undefined when the route has none. */
  #deadline: NodeJS.Timeout | undefined;
  /** Set when the deadline passed before undici started the request (the pool's queue). */
  #timedOut: Error | undefined;
  // The client leaving mid-handshake aborts the upstream side.
  readonly #onClientClose = () => {
    if (this.#settled) return;
    this.#clientLeft = true;
    this.#controller?.abort(new Error("client left during the handshake"));
  };

  private readonly client: Duplex;

  constructor(
    private readonly handshake: HandshakeClient,
    private readonly requestId: string,
    private readonly outcome: UpgradeOutcome,
  ) {
    this.client = handshake.stream;
    this.client.once("close", this.#onClientClose);
  }

  /**
   * The route's totalMs: a node that accepts the connection and never answers fails the
   * handshake as a header timeout (504, and the breaker records it, freeing a half-open
   * permit) instead of holding it for undici's 300 s. 0: none. A timer per handshake: they
   * are few beside requests, and end quickly or become tunnels.
   */
  boundBy(totalMs: number): void {
    if (totalMs > 0) this.#deadline = setTimeout(() => this.#timeOut(), totalMs).unref();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#timedOut !== undefined) controller.abort(this.#timedOut);
    else if (this.#clientLeft) controller.abort(new Error("client left during the handshake"));
  }

  /** totalMs passed: failed as undici's own headers timeout is (header_timeout). */
  #timeOut(): void {
    if (this.#settled) return;
    const error = Object.assign(new Error("websocket handshake past the route's totalMs"), {
      code: "UND_ERR_HEADERS_TIMEOUT",
    });
    if (this.#controller === undefined) this.#timedOut = error;
    else this.#controller.abort(error);
  }

  onRequestUpgrade(
    _controller: Dispatcher.DispatchController,
    _status: number,
    headers: IncomingHttpHeaders,
    socket: Duplex,
  ): void {
    this.#settled = true;
    clearTimeout(this.#deadline);
    this.client.off("close", this.#onClientClose);
    this.outcome.upgraded(headers, socket);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    // 1xx informational answers before the final one are not relayed.
    if (status < 200) return;
    this.#status = status;
    this.outcome.answered(status);
    const client = this.client;
    if (!client.writable) {
      this.#clientLeft = true;
      controller.abort(new Error("client left during the handshake"));
      return;
    }
    this.handshake.relayHead(status, statusMessage, clientResponseHeaders(headers, this.requestId));
    // Backpressure: a slow client pauses the node's body instead of growing a buffer.
    client.on("drain", () => controller.resume());
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.client.write(chunk)) controller.pause();
  }

  onResponseEnd(): void {
    this.#settled = true;
    clearTimeout(this.#deadline);
    this.client.off("close", this.#onClientClose);
    this.client.end();
    this.outcome.relayed();
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (this.#settled) return;
    this.#settled = true;
    clearTimeout(this.#deadline);
    this.client.off("close", this.#onClientClose);
    // A relayed answer that broke midway can only be cut; the status line already went out.
    if (this.#status !== 0) this.client.destroy();
    this.outcome.failed(error, this.#clientLeft);
  }

  /** The status the node answered with; 0 until it has. */
  get status(): number {
    return this.#status;
  }
}
