/** First wait after a worker that died young: long enough not to spin, short enough to hide. */
export const FIRST_RESTART_DELAY_MS = 100;
/** The longest wait between forks: a worker broken for good costs one fork per 30 s. */
export const MAX_RESTART_DELAY_MS = 30_000;
/**
 * A worker that served this long before it died was healthy: the next fork is immediate and the
 * doubling starts over. As long as the longest wait, so a worker that outlived it proves that
 * whatever killed its predecessors (a bad config, a certificate mid-renewal) has passed.
 */
export const HEALTHY_RUN_MS = MAX_RESTART_DELAY_MS;

export interface RestartBackoffOptions {
  readonly firstDelayMs?: number;
  readonly maxDelayMs?: number;
  readonly healthyRunMs?: number;
}

/**
 * How long to wait before forking again a worker slot whose worker died. One death after a
 * healthy run restarts at once (an OOM kill should cost nothing); each further death of a worker
 * that did not serve `healthyRunMs` doubles the wait from `firstDelayMs` up to `maxDelayMs`, so a
 * worker that cannot start (its port taken, its config or certificates unreadable) does not turn
 * into a fork storm.
 */
export class RestartBackoff {
  readonly #firstDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #healthyRunMs: number;
  /** Deaths in a row of workers that did not serve a healthy run. */
  #streak = 0;

  constructor(options: RestartBackoffOptions = {}) {
    this.#firstDelayMs = options.firstDelayMs ?? FIRST_RESTART_DELAY_MS;
    this.#maxDelayMs = options.maxDelayMs ?? MAX_RESTART_DELAY_MS;
    this.#healthyRunMs = options.healthyRunMs ?? HEALTHY_RUN_MS;
  }

  /**
   * A worker died after serving `servedMs` (0 when it never listened): the delay before the
   * next fork.
   */
  died(servedMs: number): number {
    if (servedMs >= this.#healthyRunMs) this.#streak = 0;
    const streak = this.#streak++;
    if (streak === 0) return 0;
    return Math.min(this.#maxDelayMs, this.#firstDelayMs * 2 ** (streak - 1));
  }
}
