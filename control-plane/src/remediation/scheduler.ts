/** Time and timers, injected so tests step a fake clock instead of sleeping. */
export interface Scheduler {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` after `ms`; returns the cancel function. */
  after(ms: number, fn: () => void): () => void;
}

export const realScheduler: Scheduler = {
  now: Date.now,
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    // A pending retry must not keep a stopping process alive.
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/**
 * The same on the monotonic clock, for pacing (debounces, coalescing) rather than for times
 * shown to people: a wall-clock step can neither hold back nor hurry what it paces. Its now()
 * counts from process start, not the epoch: only differences mean anything.
 */
export const monotonicScheduler: Scheduler = {
  now: () => performance.now(),
  after: realScheduler.after,
};
