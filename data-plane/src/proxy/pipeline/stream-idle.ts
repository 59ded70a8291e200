import type { Exchange } from "./exchange.js";

/** What a watch reports to: the total-timeout stage's handler of the request. */
export interface IdleOwner {
  /** The stream stayed silent for streamIdleMs; must not throw (a timer calls it). */
  streamIdle(): void;
  readonly exchange: Exchange;
}

/**
 * routes' timeouts.streamIdleMs: a streaming response (see isStreamingResponse) with no byte in
 * either direction for that long is cut as a body_timeout. The total-timeout stage bounds a
 * request until its response turns out to be a stream, and then hands it to one of these: only
 * streams get a watch and its timer, so the other responses allocate nothing for the idle cut
 * (a stage handler of its own cost every request 88 B). The timer is refreshed per chunk from
 * the upstream and per chunk of the client's request body still uploading (a duplex stream may
 * be silent one way for long).
 */
export class StreamIdleWatch {
  #timer: NodeJS.Timeout | undefined;
  /** The client's body listener; made only for a stream whose request is still uploading. */
  #refresh: (() => void) | undefined;

  constructor(
    private readonly owner: IdleOwner,
    idleMs: number,
  ) {
    this.#timer = setTimeout(onIdle, idleMs, owner);
    // A 'data' listener only observes: undici (or the replay buffer) already reads the request.
    const exchange = owner.exchange;
    const req = exchange.req;
    if (exchange.body !== null && !req.readableEnded) {
      this.#refresh = () => this.#timer?.refresh();
      req.on("data", this.#refresh);
    }
  }

  /** A chunk came from the upstream. */
  refresh(): void {
    this.#timer?.refresh();
  }

  stop(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#refresh !== undefined) {
      this.owner.exchange.req.off("data", this.#refresh);
      this.#refresh = undefined;
    }
  }
}

// Outside any request listener's guard: a throw ends this exchange, not the process.
function onIdle(owner: IdleOwner): void {
  try {
    owner.streamIdle();
  } catch (bug) {
    owner.exchange.failInternally(bug);
  }
}
