import { describe, expect, it } from "vitest";
import { HealthReportPacer } from "./health-report-pacer.js";
import type { HealthChange, HealthState } from "./node-health.js";
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

function change(address: string, from: HealthState, to: HealthState): HealthChange {
  return { upstream: "rack", address, from, to, reason: "probe-failures", evidence: {}, at: 0 };
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

  it("turns a rack of 6,000 nodes evicted at once into one report per interval", () => {
    const timers = manualSchedule();
    const sent: (HealthChange | undefined)[] = [];
    const pacer = new HealthReportPacer({
      send: (held) => sent.push(held),
      schedule: timers.schedule,
    });
    for (let i = 0; i < 6_000; i++) pacer.request(change(`127.0.0.1:${i}`, "healthy", "evicted"));
    expect(sent).toHaveLength(1);
    timers.fire();
    expect(sent).toEqual([undefined, undefined]);
  });

  it("never skips a state: a node changing again before its change was sent reports the state it left", () => {
    const timers = manualSchedule();
    const sent: (HealthChange | undefined)[] = [];
    const pacer = new HealthReportPacer({
      send: (held) => sent.push(held),
      schedule: timers.schedule,
    });
    pacer.request(change("10.0.0.9:80", "healthy", "evicted")); // sent at once, opens the interval
    pacer.request(change("10.0.0.1:80", "healthy", "quarantined")); // waits for the interval's end
    expect(sent).toHaveLength(1);
    // The confirming probe evicts it before the quarantine went out: send now, held quarantined.
    const evicted = change("10.0.0.1:80", "quarantined", "evicted");
    pacer.request(evicted);
    expect(sent).toEqual([undefined, evicted]);
    // The eviction itself goes at the interval's end.
    timers.fire();
    expect(sent).toEqual([undefined, evicted, undefined]);
    timers.fire();
    expect(sent).toHaveLength(3);
  });

  it("keeps its pacing when the reports keep every change: a node changing again waits for the interval", () => {
    const timers = manualSchedule();
    const sent: (HealthChange | undefined)[] = [];
    const pacer = new HealthReportPacer({
      send: (held) => sent.push(held),
      schedule: timers.schedule,
      keepsEveryChange: () => true,
    });
    pacer.request(change("10.0.0.9:80", "healthy", "evicted"));
    pacer.request(change("10.0.0.1:80", "healthy", "quarantined"));
    pacer.request(change("10.0.0.1:80", "quarantined", "evicted"));
    // Changes-only reports list both of its transitions: nothing forces a report early.
    expect(sent).toEqual([undefined]);
    timers.fire();
    expect(sent).toEqual([undefined, undefined]);
  });
});
