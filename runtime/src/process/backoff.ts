export interface BackoffOptions {
  /** First retry waits up to this long; default 250 ms. */
  baseMs?: number;
  /** No retry waits longer than this; default 10 s. */
  maxMs?: number;
  /** Uniform random in [0, 1); default Math.random. Tests inject a fixed sequence. */
  random?: () => number;
}

/**
 * Exponential backoff with full jitter: each delay is uniform in [0, min(max, base * 2^n)).
 * Full jitter spreads a fleet of data planes that lost the same control plane at once, so
 * they do not reconnect in lockstep.
 */
export class Backoff {
  readonly baseMs: number;
  readonly maxMs: number;
  readonly #random: () => number;
  #attempt = 0;

  constructor(options: BackoffOptions = {}) {
    this.baseMs = options.baseMs ?? 250;
    this.maxMs = options.maxMs ?? 10_000;
    this.#random = options.random ?? Math.random;
    if (!(this.baseMs > 0 && this.maxMs >= this.baseMs)) {
      throw new RangeError(`backoff needs 0 < baseMs <= maxMs, got ${this.baseMs}, ${this.maxMs}`);
    }
  }

  /** The delay before the next attempt; each call widens the window until it reaches maxMs. */
  next(): number {
    const ceiling = Math.min(this.maxMs, this.baseMs * 2 ** this.#attempt);
    if (ceiling < this.maxMs) this.#attempt += 1;
    return Math.floor(this.#random() * ceiling);
  }

  /** Back to the narrowest window, after a connection that proved healthy. */
  reset(): void {
    this.#attempt = 0;
  }
}
