import type { DeadlineEntry, DeadlineList, DeadlineSweep } from "./deadline-sweep.js";
import type { Exchange } from "./exchange.js";

/** What a watch reports to: the total-timeout stage's handler of the request. */
export interface IdleOwner {
  /** The stream stayed silent for streamIdleMs; must not throw (the sweep serves others too). */
  streamIdle(): void;
  readonly exchange: Exchange;
}

/**
 * routes' timeouts.streamIdleMs: a streaming response (see isStreamingResponse) with no byte in
 * either direction for that long is cut as a body_timeout. The total-timeout stage bounds a
 * request until its response turns out to be a stream, and then hands it to one of these: only
 * streams get a watch, so the other responses allocate nothing for the idle cut (a stage
 * handler of its own cost every request 88 B). A watch is an entry of the stage's deadline
 * sweep, not a timer of its own: a Node timer cost every stream an insert and an unenroll
 * (about 5 us of an SSE response's CPU), and each chunk moves the entry to its list's tail
 * instead of refreshing a timer. It restarts per chunk from the upstream and per chunk of the
 * client's request body still uploading (a duplex stream may be silent one way for long).
 */
export class StreamIdleWatch implements DeadlineEntry {
  // DeadlineEntry's fields, owned by the sweep.
  deadline = 0;
  prev: DeadlineEntry | undefined = undefined;
  next: DeadlineEntry | undefined = undefined;
  list: DeadlineList | undefined = undefined;
  /** The client's body listener; made only for a stream whose request is still uploading. */
  #restart: (() => void) | undefined;

  constructor(
    private readonly owner: IdleOwner,
    private readonly idleMs: number,
    private readonly sweep: DeadlineSweep,
  ) {
    sweep.add(this, idleMs);
    // A 'data' listener only observes: undici (or the replay buffer) already reads the request.
    const exchange = owner.exchange;
    const req = exchange.req;
    if (exchange.body !== null && !req.readableEnded) {
      this.#restart = () => this.refresh();
      req.on("data", this.#restart);
    }
  }

  /** A chunk went by: the silence starts again. */
  refresh(): void {
    if (this.list !== undefined) this.sweep.add(this, this.idleMs);
  }

  stop(): void {
    this.sweep.remove(this);
    if (this.#restart !== undefined) {
      this.owner.exchange.req.off("data", this.#restart);
      this.#restart = undefined;
    }
  }

  /** The sweep found the stream silent past its deadline. */
  expired(): void {
    const owner = this.owner;
    try {
      owner.streamIdle();
    } catch (bug) {
      owner.exchange.failInternally(bug);
    }
  }
}
