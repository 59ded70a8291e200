/**
 * A timer that should fire every millisecond: its longest lateness is the longest turn the
 * event loop was blocked while it ran. `stop()` ends it and returns that gap in milliseconds.
 */
export function watchLongestGap(): { stop(): number } {
  let longestMs = 0;
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    longestMs = Math.max(longestMs, now - last);
    last = now;
  }, 1);
  return {
    stop() {
      clearInterval(ticker);
      return longestMs;
    },
  };
}
