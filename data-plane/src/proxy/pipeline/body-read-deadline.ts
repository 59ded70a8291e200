import type { DeadlineEntry, DeadlineList, DeadlineSweep } from "./deadline-sweep.js";

/** What a body read's deadline reports to: the reader, which answers 408. */
export interface BodyReadOwner {
  /** The client's body stalled or took too long; must not throw (the sweep serves others). */
  bodyTimedOut(): void;
}

/**
 * One deadline of a request body read whole before the first attempt (request-body.ts): the
 * gap between chunks (the route's bodyMs, restarted per chunk, as nginx's client_body_timeout)
 * or the whole read (the route's totalMs). An entry of the stage's deadline sweep, not a timer
 * of its own, so a read costs no Node timer; a chunk moves the gap entry to its list's tail.
 */
export class BodyReadDeadline implements DeadlineEntry {
  // DeadlineEntry's fields, owned by the sweep.
  deadline = 0;
  prev: DeadlineEntry | undefined = undefined;
  next: DeadlineEntry | undefined = undefined;
  list: DeadlineList | undefined = undefined;

  constructor(
    private readonly owner: BodyReadOwner,
    private readonly durationMs: number,
    private readonly sweep: DeadlineSweep,
  ) {
    sweep.add(this, durationMs);
  }

  /** A chunk arrived: the gap starts again. */
  restart(): void {
    if (this.list !== undefined) this.sweep.add(this, this.durationMs);
  }

  stop(): void {
    this.sweep.remove(this);
  }

  expired(): void {
    this.owner.bodyTimedOut();
  }
}
