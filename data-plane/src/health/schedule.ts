/**
 * Runs `fn` once after `delayMs` and returns what cancels it. The pacing of health reports and
 * log summaries takes one, so their tests run the timers by hand instead of waiting.
 */
export type Schedule = (fn: () => void, delayMs: number) => () => void;

/** The real timers; unref'd, because a pending report or log line must not keep a stopping process alive. */
export const systemSchedule: Schedule = (fn, delayMs) => {
  const timer = setTimeout(fn, delayMs);
  timer.unref();
  return () => clearTimeout(timer);
};
