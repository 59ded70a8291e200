import { describe, expect, it } from "vitest";
import { HealthReportPacer } from "./health-report-pacer.js";
import type { Schedule } from "./schedule.js";

/** Timers the test fires by hand. */
function manualSchedule() {
  const timers: { fn: () => void; delayMs: number; cancelled: boolean }[] = [];
  const schedule: Schedule = (fn, delayMs) => {
    const timer = { fn, delayMs, cancelled: false };
    timers.push(timer);
    return () => {
      timer.cancelled = true;
    };
  };
  /** Fires every pending timer once (timers they start stay pending). */
  const fire = () => {
    for (const timer of timers.splice(0)) if (!timer.cancelled) timer.fn();
  };
  const pending = () => timers.filter((timer) => !timer.cancelled).length;
  return { schedule, fire, pending };
}

describe("HealthReportPacer", () => {
  it("sends a lone change at once", () => {
    const timers = manualSchedule();
    let sent = 0;
    const pacer = new HealthReportPacer({ send: () => sent++, schedule: timers.schedule });
    pacer.request();
    expect(sent).toBe(1);
    // The quiet interval ends without anything new to say.
    timers.fire();
    expect(sent).toBe(1);
    expect(timers.pending()).toBe(0);
  });

  it("turns a burst of 6,000 changes into one report at once and one at the interval's end", () => {
    const timers = manualSchedule();
    let sent = 0;
    const pacer = new HealthReportPacer({ send: () => sent++, schedule: timers.schedule });
    for (let i = 0; i < 6_000; i++) pacer.request();
    expect(sent).toBe(1);
    timers.fire();
    expect(sent).toBe(2);
    // A burst going on: still at most one per interval.
    for (let i = 0; i < 6_000; i++) pacer.request();
    expect(sent).toBe(2);
    timers.fire();
    expect(sent).toBe(3);
    timers.fire();
    expect(sent).toBe(3);
  });

  it("sends nothing after close", () => {
    const timers = manualSchedule();
    let sent = 0;
    const pacer = new HealthReportPacer({ send: () => sent++, schedule: timers.schedule });
    pacer.request();
    pacer.request();
    pacer.close();
    timers.fire();
    pacer.request();
    expect(sent).toBe(1);
  });

  it("refuses a negative interval, naming it", () => {
    expect(() => new HealthReportPacer({ send: () => {}, intervalMs: -1 })).toThrow(
      /health report intervalMs must be >= 0, got -1/,
    );
  });
});
