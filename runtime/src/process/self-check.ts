import { monitorEventLoopDelay } from "node:perf_hooks";
import { getHeapStatistics } from "node:v8";

export type CheckResult = { ok: true } | { ok: false; reason: string };

/** A health check cheap enough to run on every watchdog tick (seed 000, 3.1). */
export interface SelfCheck {
  /** Judges the interval since the previous call, then starts a new interval. */
  check(): CheckResult;
  stop(): void;
}

export interface SelfCheckOptions {
  /** Longest event-loop stall tolerated within one interval, in ms. */
  maxEventLoopDelayMs: number;
  /** Largest used heap as a fraction of V8's heap limit, in (0, 1]. */
  maxHeapRatio: number;
  /**
   * The time expected between calls, in ms. A call later than this by more than the limit
   * fails too: the histogram only records a stall once its own timer runs, which can be after
   * the watchdog's tick that follows the same stall. Default: no lateness check.
   */
  intervalMs?: number;
  /** Monotonic clock in ms for the lateness check; default performance.now. */
  now?: () => number;
  /** Longest stall in ms since the previous call, then reset; default a perf_hooks histogram. */
  eventLoopDelayMs?: () => number;
  /** Heap in bytes; default v8.getHeapStatistics(). */
  heap?: () => { used: number; limit: number };
}

/**
 * Only the two things a hung or dying Node process shows: a stalled event loop and a heap at
 * its limit. Anything heavier (probing upstreams, calling the control plane) belongs to other
 * layers, because a slow check here would itself stall the ping and get a healthy process
 * killed (seed 000, 3.1).
 */
export function createSelfCheck(options: SelfCheckOptions): SelfCheck {
  const { maxEventLoopDelayMs, maxHeapRatio } = options;
  let stop = () => {};
  let stallMs = options.eventLoopDelayMs;
  if (stallMs === undefined) {
    // 10 ms resolution is fine: the limit is in seconds, and a coarse timer costs nothing.
    const histogram = monitorEventLoopDelay({ resolution: 10 });
    histogram.enable();
    stop = () => histogram.disable();
    stallMs = () => {
      // max, not a percentile: one long stall is the hang signal, however rare.
      const max = histogram.max / 1e6;
      histogram.reset();
      return max;
    };
  }
  const heap =
    options.heap ??
    (() => {
      const stats = getHeapStatistics();
      return { used: stats.used_heap_size, limit: stats.heap_size_limit };
    });
  const readStall = stallMs;
  const now = options.now ?? (() => performance.now());
  let lastCheckAt = now();
  return {
    check() {
      const at = now();
      const late = options.intervalMs === undefined ? 0 : at - lastCheckAt - options.intervalMs;
      lastCheckAt = at;
      const stall = Math.max(readStall(), late);
      if (stall > maxEventLoopDelayMs) {
        return {
          ok: false,
          reason: `event loop stalled for ${Math.round(stall)} ms (limit ${maxEventLoopDelayMs} ms)`,
        };
      }
      const { used, limit } = heap();
      if (limit > 0 && used / limit > maxHeapRatio) {
        return {
          ok: false,
          reason: `heap ${mib(used)} of ${mib(limit)} MiB used (limit ratio ${maxHeapRatio})`,
        };
      }
      return { ok: true };
    },
    stop: () => stop(),
  };
}

function mib(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(0);
}
