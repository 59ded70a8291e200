import { Writable } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { HealthLog } from "./health-log.js";
import type { HealthChange } from "./node-health.js";
import type { Schedule } from "./schedule.js";

function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n")) if (line !== "") lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: "info" }, stream), lines };
}

function manualSchedule() {
  const pending: (() => void)[] = [];
  const schedule: Schedule = (fn) => {
    pending.push(fn);
    return () => {
      const at = pending.indexOf(fn);
      if (at >= 0) pending.splice(at, 1);
    };
  };
  const fire = () => {
    for (const fn of pending.splice(0)) fn();
  };
  return { schedule, fire, pending };
}

function eviction(upstream: string, address: string): HealthChange {
  return {
    upstream,
    address,
    from: "healthy",
    to: "evicted",
    reason: "probe-failures",
    evidence: { error: "ECONNREFUSED" },
    at: 0,
  };
}

describe("HealthLog", () => {
  it("logs a single eviction as one warning with what the probe saw", () => {
    const { logger, lines } = capture();
    const timers = manualSchedule();
    const log = new HealthLog({ logger, schedule: timers.schedule });
    log.change(eviction("agents", "10.0.0.1:80"));
    timers.fire();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 40,
      msg: "upstream node evicted",
      upstream: "agents",
      node: "10.0.0.1:80",
      error: "ECONNREFUSED",
    });
  });

  it("summarizes a burst of 5,000 evictions in a bounded number of lines", () => {
    const { logger, lines } = capture();
    const timers = manualSchedule();
    const log = new HealthLog({ logger, schedule: timers.schedule, linesPerWindow: 10 });
    for (let i = 0; i < 5_000; i++) log.change(eviction(`rack-${i % 500}`, `127.0.0.1:${i}`));
    timers.fire();
    expect(lines).toHaveLength(11);
    const summary = lines[10]!;
    expect(summary).toMatchObject({ level: 40, changes: 4_990, evicted: 4_990, upstreams: 500 });
    expect(summary.sample).toHaveLength(10);
    expect(summary.sample).toContain("rack-10/127.0.0.1:10 healthy->evicted");
    // The next window starts fresh: its first changes are single lines again.
    log.change(eviction("agents", "10.0.0.2:80"));
    expect(lines).toHaveLength(12);
    expect(lines[11]).toMatchObject({ msg: "upstream node evicted", node: "10.0.0.2:80" });
  });

  it("writes the pending summary on flush", () => {
    const { logger, lines } = capture();
    const timers = manualSchedule();
    const log = new HealthLog({ logger, schedule: timers.schedule, linesPerWindow: 1 });
    log.change(eviction("a", "10.0.0.1:80"));
    log.change(eviction("a", "10.0.0.2:80"));
    log.flush();
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ changes: 1, evicted: 1 });
    expect(timers.pending).toHaveLength(0);
  });
});
