import { describe, expect, it, vi } from "vitest";
import { type CheckResult, createSelfCheck } from "./self-check.js";
import { startWatchdog, watchdogIntervalMs } from "./watchdog.js";

const quiet = { warn: () => {}, info: () => {} };

function blockEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // Busy on purpose: a runaway synchronous loop.
  }
}

/** Resolves after the watchdog has pinged `count` more times. */
function pingRecorder() {
  const at: number[] = [];
  let waiter: { count: number; resolve: () => void } | undefined;
  return {
    at,
    ping: () => {
      at.push(performance.now());
      if (waiter !== undefined && at.length >= waiter.count) waiter.resolve();
    },
    until: (count: number) =>
      new Promise<void>((resolve) => {
        if (at.length >= count) resolve();
        else waiter = { count, resolve };
      }),
  };
}

describe("watchdogIntervalMs", () => {
  it.each([
    [{}, undefined],
    [{ WATCHDOG_USEC: "20000000" }, 10_000],
    [{ WATCHDOG_USEC: "1000000", WATCHDOG_PID: "42" }, 500],
    [{ WATCHDOG_USEC: "1000000", WATCHDOG_PID: "43" }, undefined], // meant for another process
    [{ WATCHDOG_USEC: "0" }, undefined],
    [{ WATCHDOG_USEC: "soon" }, undefined],
  ])("%j -> %s", (env, expected) => {
    expect(watchdogIntervalMs(env, 42)).toBe(expected);
  });
});

describe("startWatchdog", () => {
  it("pings only on ticks whose check passes, and logs the failure once", async () => {
    const results: CheckResult[] = [
      { ok: true },
      { ok: false, reason: "heap" },
      { ok: false, reason: "heap" },
      { ok: true },
    ];
    const outcomes: string[] = [];
    const warnings: string[] = [];
    let finished = () => {};
    const done = new Promise<void>((resolve) => {
      finished = resolve;
    });
    const watchdog = startWatchdog({
      intervalMs: 5,
      check: () => {
        const next = results.shift() ?? { ok: true };
        outcomes.push(next.ok ? "check ok" : "check failed");
        if (results.length === 0) finished();
        return next;
      },
      ping: () => outcomes.push("ping"),
      logger: { warn: (obj) => warnings.push((obj as { reason: string }).reason), info: () => {} },
    });
    await done;
    watchdog.stop();
    expect(outcomes.slice(0, 6)).toEqual([
      "check ok",
      "ping",
      "check failed",
      "check failed",
      "check ok",
      "ping",
    ]);
    expect(warnings).toEqual(["heap"]);
  });

  it("stops pinging while the event loop is blocked, and skips the tick that sees the stall", async () => {
    const selfCheck = createSelfCheck({
      maxEventLoopDelayMs: 150,
      maxHeapRatio: 1,
      intervalMs: 50,
    });
    // One log of what happened, in order: the assertion is on the sequence, not on durations.
    const events: string[] = [];
    const pings = pingRecorder();
    const watchdog = startWatchdog({
      intervalMs: 50,
      check: () => {
        const result = selfCheck.check();
        events.push(result.ok ? "check ok" : `check failed: ${result.reason}`);
        return result;
      },
      ping: () => {
        events.push("ping");
        pings.ping();
      },
      logger: quiet,
    });
    try {
      await pings.until(3);
      events.push("blocked");
      blockEventLoop(400);
      events.push("unblocked");
      await pings.until(pings.at.length + 2);
      const after = events.slice(events.indexOf("blocked"));
      // Nothing ran during the block, and the first tick after it judged the stall and
      // withheld its ping; pings resumed once a tick passed.
      expect(after.slice(0, 3)).toEqual([
        "blocked",
        "unblocked",
        expect.stringMatching(/^check failed: event loop stalled for \d+ ms \(limit 150 ms\)$/),
      ]);
      expect(after.slice(3)).toContain("ping");
    } finally {
      watchdog.stop();
      selfCheck.stop();
    }
  });

  it("keeps pinging a healthy loop once per interval", () => {
    vi.useFakeTimers();
    try {
      // The check reads the faked clock, so a tick is never "late" however busy the machine is.
      const selfCheck = createSelfCheck({
        maxEventLoopDelayMs: 150,
        maxHeapRatio: 1,
        intervalMs: 20,
        now: () => Date.now(),
        eventLoopDelayMs: () => 0,
      });
      const pings = pingRecorder();
      const watchdog = startWatchdog({
        intervalMs: 20,
        check: () => selfCheck.check(),
        ping: pings.ping,
        logger: quiet,
      });
      vi.advanceTimersByTime(199);
      expect(pings.at).toHaveLength(9);
      vi.advanceTimersByTime(1);
      expect(pings.at).toHaveLength(10);
      watchdog.stop();
      vi.advanceTimersByTime(1_000);
      expect(pings.at).toHaveLength(10);
      selfCheck.stop();
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("createSelfCheck", () => {
  it("fails on a stall over the limit or a heap over the ratio, naming which", () => {
    let stall = 10;
    let used = 50;
    const check = createSelfCheck({
      maxEventLoopDelayMs: 1_000,
      maxHeapRatio: 0.9,
      eventLoopDelayMs: () => stall,
      heap: () => ({ used: used * 1024 * 1024, limit: 100 * 1024 * 1024 }),
    });
    expect(check.check()).toEqual({ ok: true });
    stall = 1_500;
    expect(check.check()).toEqual({
      ok: false,
      reason: "event loop stalled for 1500 ms (limit 1000 ms)",
    });
    stall = 10;
    used = 95;
    expect(check.check()).toEqual({
      ok: false,
      reason: "heap 95 of 100 MiB used (limit ratio 0.9)",
    });
  });

  it("fails a call that comes later than the interval by more than the limit", () => {
    let now = 0;
    const check = createSelfCheck({
      maxEventLoopDelayMs: 1_000,
      maxHeapRatio: 1,
      intervalMs: 500,
      now: () => now,
      eventLoopDelayMs: () => 0, // the histogram has not seen the stall yet
      heap: () => ({ used: 0, limit: 1 }),
    });
    now = 1_400; // 900 ms late: tolerated
    expect(check.check()).toEqual({ ok: true });
    now = 1_400 + 500 + 1_200;
    expect(check.check()).toEqual({
      ok: false,
      reason: "event loop stalled for 1200 ms (limit 1000 ms)",
    });
  });
});
