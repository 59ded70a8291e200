/** A source of time in milliseconds; everything that waits or expires reads it, never Date. */
export interface Clock {
  now(): number;
}

// Fixed when the process starts; read once, as its getter costs a call on every request's
// several clock reads.
const TIME_ORIGIN = performance.timeOrigin;

/**
 * Epoch milliseconds that never go backwards: anchored to the wall clock once at start, then
 * advanced by the monotonic timer, so an NTP step cannot shorten or stretch a breaker cooldown.
 */
export const systemClock: Clock = {
  now: () => TIME_ORIGIN + performance.now(),
};

/** A clock tests step by hand: time moves only when `advance` is called. */
export class FakeClock implements Clock {
  private current: number;

  /** @param startMs the first reading; default 0. */
  constructor(startMs = 0) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  /** Moves time forward; a negative step is refused because real clocks here never go back. */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`advance(ms) needs ms >= 0, got ${ms}`);
    this.current += ms;
  }
}
