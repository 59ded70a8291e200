export interface RetryBudgetOptions {
  /** Share of active requests that may be retrying at once; default 0.2. */
  ratio?: number;
  /** Retries in flight always allowed, so a quiet upstream can still retry; default 3. */
  minConcurrent?: number;
}

/**
 * Caps retries to an upstream so they cannot multiply load on a sick dependency (seed 004: six
 * tools times three retries is 18 failed calls per gesture). One per upstream.
 */
export class RetryBudget {
  private readonly ratio: number;
  private readonly minConcurrent: number;
  private active = 0;
  private retrying = 0;

  constructor(options: RetryBudgetOptions = {}) {
    this.ratio = options.ratio ?? 0.2;
    this.minConcurrent = options.minConcurrent ?? 3;
  }

  /** A client request to this upstream began (count it once, not per attempt). */
  requestStarted(): void {
    this.active += 1;
  }

  requestFinished(): void {
    if (this.active > 0) this.active -= 1;
  }

  /** Takes a retry slot if the budget allows; pair a true result with `retryFinished`. */
  tryRetry(): boolean {
    // The epsilon keeps 0.2 * 35 from flooring to 6 through a rounding error.
    const limit = Math.max(this.minConcurrent, Math.floor(this.active * this.ratio + 1e-9));
    if (this.retrying >= limit) return false;
    this.retrying += 1;
    return true;
  }

  retryFinished(): void {
    if (this.retrying > 0) this.retrying -= 1;
  }

  get activeRequests(): number {
    return this.active;
  }

  get retriesInFlight(): number {
    return this.retrying;
  }
}
