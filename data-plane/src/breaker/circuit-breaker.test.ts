import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import type { BreakerOutcome } from "./breaker-outcome.js";
import type { BreakerPolicyInput } from "./breaker-policy.js";
import {
  type BreakerPermit,
  type BreakerTransition,
  CircuitBreaker,
  type CircuitBreakerOptions,
} from "./circuit-breaker.js";

function setup(policy: BreakerPolicyInput = {}, options: Partial<CircuitBreakerOptions> = {}) {
  const clock = new FakeClock(1_000_000);
  const events: BreakerTransition[] = [];
  const breaker = new CircuitBreaker({
    upstream: "agents",
    policy,
    clock,
    random: () => 0,
    onTransition: (e) => events.push(e),
    ...options,
  });
  /** Sends one request through the breaker and records its outcome. */
  const send = (outcome: BreakerOutcome) => {
    const permit = breaker.acquire();
    if (!permit.ok) throw new Error(`rejected: ${permit.reason}`);
    breaker.record(permit, outcome);
  };
  const sendAll = (outcomes: readonly BreakerOutcome[]) => {
    for (const o of outcomes) send(o);
  };
  return { clock, events, breaker, send, sendAll };
}

const times = (n: number, o: BreakerOutcome): BreakerOutcome[] => Array(n).fill(o);

/** Trips a default breaker with 5 transport failures. */
function tripped(policy: BreakerPolicyInput = {}, options: Partial<CircuitBreakerOptions> = {}) {
  const t = setup(policy, options);
  t.sendAll(times(policy.consecutiveFailures ?? 5, "transport"));
  expect(t.breaker.state).toBe("open");
  return t;
}

describe("CircuitBreaker trip rules (closed -> open)", () => {
  const rows: {
    name: string;
    outcomes: BreakerOutcome[];
    policy?: BreakerPolicyInput;
    countStreamBroken?: boolean;
    state: "closed" | "open";
    reason?: string;
  }[] = [
    { name: "4 transport failures", outcomes: times(4, "transport"), state: "closed" },
    {
      name: "5 transport failures at any volume",
      outcomes: times(5, "transport"),
      state: "open",
      reason: "consecutive_failures",
    },
    {
      name: "a success breaks the chain",
      outcomes: [...times(4, "transport"), "success", ...times(4, "transport")],
      state: "closed",
    },
    {
      name: "a 5xx neither extends nor breaks the chain",
      outcomes: [...times(4, "transport"), "status_5xx", "transport"],
      state: "open",
      reason: "consecutive_failures",
    },
    {
      name: "4 in a row with a policy of 3",
      policy: { consecutiveFailures: 3 },
      outcomes: times(3, "transport"),
      state: "open",
      reason: "consecutive_failures",
    },
    { name: "19 5xx: below minRequests", outcomes: times(19, "status_5xx"), state: "closed" },
    {
      name: "20 5xx: at minRequests, all failed",
      outcomes: times(20, "status_5xx"),
      state: "open",
      reason: "failure_ratio",
    },
    {
      name: "12 of 20 failed is exactly 0.6, not over",
      outcomes: [...times(8, "success"), ...times(12, "status_5xx")],
      state: "closed",
    },
    {
      name: "13 of 21 failed is over 0.6",
      outcomes: [...times(8, "success"), ...times(13, "status_5xx")],
      state: "open",
      reason: "failure_ratio",
    },
    {
      name: "60 of 100 stays closed",
      outcomes: [...times(40, "success"), ...times(60, "status_5xx")],
      state: "closed",
    },
    {
      name: "61 of 101 opens",
      outcomes: [...times(40, "success"), ...times(61, "status_5xx")],
      state: "open",
      reason: "failure_ratio",
    },
    {
      name: "transport failures count toward the ratio too",
      policy: { consecutiveFailures: 100 },
      outcomes: [...times(8, "success"), ...times(13, "transport")],
      state: "open",
      reason: "failure_ratio",
    },
    {
      name: "broken streams do not count by default",
      outcomes: times(40, "stream_broken"),
      state: "closed",
    },
    {
      name: "broken streams count when configured, in the ratio only",
      countStreamBroken: true,
      outcomes: times(20, "stream_broken"),
      state: "open",
      reason: "failure_ratio",
    },
    {
      name: "minRequests and failureRatio from the policy",
      policy: { minRequests: 4, failureRatio: 0.5 },
      outcomes: ["success", "status_5xx", "success", "status_5xx", "status_5xx"],
      state: "open",
      reason: "failure_ratio",
    },
  ];

  for (const row of rows) {
    it(row.name, () => {
      const t = setup(row.policy, { countStreamBroken: row.countStreamBroken ?? false });
      t.sendAll(row.outcomes);
      expect(t.breaker.state).toBe(row.state);
      if (row.state === "open") {
        expect(t.events).toEqual([
          {
            upstream: "agents",
            from: "closed",
            to: "open",
            reason: row.reason,
            at: 1_000_000,
            until: 1_030_000,
          },
        ]);
      } else {
        expect(t.events).toEqual([]);
      }
    });
  }

  it("forgets failures older than the window", () => {
    const t = setup();
    t.sendAll(times(10, "status_5xx"));
    t.clock.advance(30_000);
    // Were the old 10 still counted, the 6th of these failures would trip it (16 of 26).
    t.sendAll([...times(10, "success"), ...times(10, "status_5xx")]);
    expect(t.breaker.state).toBe("closed");
  });

  it("still counts failures inside the window", () => {
    const t = setup();
    t.sendAll(times(10, "status_5xx"));
    t.clock.advance(26_999);
    // 16 of 26 over 0.6: the 6th new failure trips only because the old 10 are still counted.
    t.sendAll([...times(10, "success"), ...times(6, "status_5xx")]);
    expect(t.breaker.state).toBe("open");
    expect(t.events[0]?.reason).toBe("failure_ratio");
  });
});

describe("CircuitBreaker open", () => {
  it("fails fast with the time left until the cooldown ends", () => {
    const t = tripped();
    const steps: [advanceMs: number, expected: unknown][] = [
      [0, { ok: false, reason: "breaker_open", retryAfterMs: 30_000 }],
      [10_000, { ok: false, reason: "breaker_open", retryAfterMs: 20_000 }],
      [19_999, { ok: false, reason: "breaker_open", retryAfterMs: 1 }],
      [1, { ok: true, probe: true }],
    ];
    for (const [advance, expected] of steps) {
      t.clock.advance(advance);
      expect(t.breaker.acquire()).toEqual(expected);
    }
  });

  it("adds up to jitterRatio of the cooldown at random", () => {
    const rows: [random: number, jitterRatio: number | undefined, untilOffset: number][] = [
      [0, undefined, 30_000],
      [0.5, undefined, 31_500],
      [0.999, undefined, 32_997],
      [0.5, 0.5, 37_500],
    ];
    for (const [random, jitterRatio, offset] of rows) {
      const t = tripped({}, { random: () => random, jitterRatio });
      expect(t.events[0]?.until).toBe(1_000_000 + offset);
      t.clock.advance(offset - 1);
      expect(t.breaker.state).toBe("open");
      t.clock.advance(1);
      expect(t.breaker.state).toBe("half-open");
    }
  });

  it("ignores outcomes of requests admitted before it opened", () => {
    const t = setup();
    const early = t.breaker.acquire() as BreakerPermit;
    t.sendAll(times(5, "transport"));
    t.breaker.record(early, "success");
    t.breaker.record(early, "transport");
    expect(t.breaker.state).toBe("open");
    expect(t.events).toHaveLength(1);
  });

  it("steps to half-open lazily, emitting the event once", () => {
    const t = tripped();
    t.clock.advance(45_000);
    expect(t.events).toHaveLength(1);
    expect(t.breaker.state).toBe("half-open");
    expect(t.breaker.state).toBe("half-open");
    expect(t.events.slice(1)).toEqual([
      {
        upstream: "agents",
        from: "open",
        to: "half-open",
        reason: "cooldown_elapsed",
        at: 1_045_000,
      },
    ]);
  });
});

describe("CircuitBreaker half-open", () => {
  function halfOpen(policy: BreakerPolicyInput = {}, options: Partial<CircuitBreakerOptions> = {}) {
    const t = tripped(policy, options);
    t.clock.advance(policy.cooldownMs ?? 30_000);
    expect(t.breaker.state).toBe("half-open");
    return t;
  }

  it("allows one probe in flight and closes after 2 consecutive successes", () => {
    const t = halfOpen();
    const first = t.breaker.acquire();
    expect(first).toEqual({ ok: true, probe: true });
    expect(t.breaker.acquire()).toEqual({
      ok: false,
      reason: "half_open_busy",
      retryAfterMs: 1_000,
    });
    t.breaker.record(first as BreakerPermit, "success");
    expect(t.breaker.state).toBe("half-open");
    expect(t.breaker.inspect()).toEqual({
      state: "half-open",
      probesInFlight: 0,
      successes: 1,
      cooldownMs: 30_000,
    });
    const second = t.breaker.acquire();
    expect(second).toEqual({ ok: true, probe: true });
    t.breaker.record(second as BreakerPermit, "success");
    expect(t.breaker.state).toBe("closed");
    expect(t.events.at(-1)).toEqual({
      upstream: "agents",
      from: "half-open",
      to: "closed",
      reason: "probes_succeeded",
      at: 1_030_000,
    });
    expect(t.breaker.acquire()).toEqual({ ok: true, probe: false });
  });

  it("honours halfOpenMaxInFlight and halfOpenSuccesses from the policy", () => {
    const t = halfOpen({ halfOpenMaxInFlight: 2, halfOpenSuccesses: 3 });
    const a = t.breaker.acquire();
    const b = t.breaker.acquire();
    expect([a.ok, b.ok, t.breaker.acquire().ok]).toEqual([true, true, false]);
    t.breaker.record(a as BreakerPermit, "success");
    t.breaker.record(b as BreakerPermit, "success");
    expect(t.breaker.state).toBe("half-open");
    t.send("success");
    expect(t.breaker.state).toBe("closed");
  });

  const probeFailures: BreakerOutcome[] = ["transport", "status_5xx"];
  for (const outcome of probeFailures) {
    it(`reopens on a ${outcome} probe with the cooldown doubled`, () => {
      const t = halfOpen();
      t.send(outcome);
      expect(t.breaker.state).toBe("open");
      expect(t.events.at(-1)).toEqual({
        upstream: "agents",
        from: "half-open",
        to: "open",
        reason: "probe_failed",
        at: 1_030_000,
        until: 1_090_000,
      });
    });
  }

  it("grows the cooldown by the multiplier up to maxCooldownMs, and closing resets it", () => {
    const t = tripped();
    const cooldowns: number[] = [];
    for (let i = 0; i < 6; i++) {
      const view = t.breaker.inspect();
      if (view.state !== "open") throw new Error("expected open");
      cooldowns.push(view.cooldownMs);
      t.clock.advance(view.retryAfterMs);
      t.send("transport");
    }
    expect(cooldowns).toEqual([30_000, 60_000, 120_000, 240_000, 300_000, 300_000]);
    t.clock.advance(300_000);
    t.sendAll(["success", "success"]);
    expect(t.breaker.state).toBe("closed");
    t.sendAll(times(5, "transport"));
    expect(t.breaker.inspect()).toEqual({
      state: "open",
      retryAfterMs: 30_000,
      cooldownMs: 30_000,
    });
  });

  it("uses cooldownMultiplier and maxCooldownMs from the policy", () => {
    const t = tripped({ cooldownMs: 1_000, cooldownMultiplier: 3, maxCooldownMs: 5_000 });
    const cooldowns: number[] = [];
    for (let i = 0; i < 4; i++) {
      const view = t.breaker.inspect();
      if (view.state !== "open") throw new Error("expected open");
      cooldowns.push(view.cooldownMs);
      t.clock.advance(view.retryAfterMs);
      t.send("status_5xx");
    }
    expect(cooldowns).toEqual([1_000, 3_000, 5_000, 5_000]);
  });

  it("a failure after one success still reopens: the successes must be consecutive", () => {
    const t = halfOpen();
    t.sendAll(["success", "transport"]);
    expect(t.breaker.state).toBe("open");
    t.clock.advance(60_000);
    t.send("success");
    expect(t.breaker.state).toBe("half-open");
  });

  it("release frees the probe slot without counting", () => {
    const t = halfOpen();
    const probe = t.breaker.acquire() as BreakerPermit;
    t.breaker.release(probe);
    expect(t.breaker.inspect()).toMatchObject({ probesInFlight: 0, successes: 0 });
    t.breaker.record(probe, "transport");
    expect(t.breaker.state).toBe("half-open");
    expect(t.breaker.acquire()).toEqual({ ok: true, probe: true });
  });

  it("a broken stream frees the probe slot and counts neither way by default", () => {
    const t = halfOpen();
    t.sendAll(["success", "stream_broken", "success"]);
    expect(t.breaker.state).toBe("closed");
  });

  it("ignores non-probe and stale probe permits", () => {
    const t = setup({ halfOpenMaxInFlight: 2 });
    const fromClosed = t.breaker.acquire() as BreakerPermit;
    t.sendAll(times(5, "transport"));
    t.clock.advance(30_000);
    const stale = t.breaker.acquire() as BreakerPermit;
    t.send("transport"); // reopens for 60 s while `stale` is still out
    t.clock.advance(60_000);
    expect(t.breaker.state).toBe("half-open");
    t.breaker.record(fromClosed, "success");
    t.breaker.record(stale, "success");
    expect(t.breaker.inspect()).toMatchObject({ state: "half-open", successes: 0 });
    t.breaker.record(stale, "transport");
    expect(t.breaker.state).toBe("half-open");
  });

  it("a probe reporting after another probe reopened it is ignored", () => {
    const t = halfOpen({ halfOpenMaxInFlight: 2 });
    const a = t.breaker.acquire() as BreakerPermit;
    const b = t.breaker.acquire() as BreakerPermit;
    t.breaker.record(a, "transport");
    t.breaker.record(b, "success");
    t.breaker.record(b, "transport");
    expect(t.breaker.state).toBe("open");
    expect(t.events.map((e) => e.to)).toEqual(["open", "half-open", "open"]);
  });
});

describe("CircuitBreaker full cycle", () => {
  it("emits exactly one event per transition", () => {
    const t = setup();
    t.sendAll(times(5, "transport"));
    t.clock.advance(30_000);
    t.send("transport");
    t.clock.advance(60_000);
    t.sendAll(["success", "success", "success"]);
    expect(t.events.map(({ from, to, reason, at }) => [from, to, reason, at - 1_000_000])).toEqual([
      ["closed", "open", "consecutive_failures", 0],
      ["open", "half-open", "cooldown_elapsed", 30_000],
      ["half-open", "open", "probe_failed", 30_000],
      ["open", "half-open", "cooldown_elapsed", 90_000],
      ["half-open", "closed", "probes_succeeded", 90_000],
    ]);
  });

  it("ignores late outcomes of requests admitted in an earlier closed period", () => {
    const t = setup();
    const early = Array.from({ length: 5 }, () => t.breaker.acquire() as BreakerPermit);
    t.sendAll(times(5, "transport"));
    t.clock.advance(30_000);
    t.sendAll(["success", "success"]);
    expect(t.breaker.state).toBe("closed");
    for (const permit of early) t.breaker.record(permit, "transport");
    expect(t.breaker.state).toBe("closed");
    t.sendAll(times(4, "transport"));
    expect(t.breaker.state).toBe("closed");
  });

  it("a closed period after recovery starts with clean counts", () => {
    const t = tripped();
    const before = t.breaker.acquire();
    expect(before.ok).toBe(false);
    t.clock.advance(30_000);
    t.sendAll(["success", "success"]);
    t.sendAll(times(4, "transport"));
    expect(t.breaker.state).toBe("closed");
  });
});

describe("CircuitBreaker.updatePolicy", () => {
  it("keeps an open breaker open with its deadline", () => {
    const t = tripped();
    t.clock.advance(10_000);
    t.breaker.updatePolicy({ cooldownMs: 1_000, maxCooldownMs: 2_000 });
    expect(t.breaker.inspect()).toEqual({
      state: "open",
      retryAfterMs: 20_000,
      cooldownMs: 30_000,
    });
    expect(t.events).toHaveLength(1);
  });

  it("keeps closed counts when the trip thresholds did not change", () => {
    const t = setup();
    t.sendAll(times(4, "transport"));
    t.breaker.updatePolicy({ cooldownMs: 10_000 });
    t.send("transport");
    expect(t.breaker.inspect()).toEqual({
      state: "open",
      retryAfterMs: 10_000,
      cooldownMs: 10_000,
    });
  });

  it("keeps closed counts for an identical policy", () => {
    const t = setup();
    t.sendAll(times(4, "transport"));
    t.breaker.updatePolicy({});
    t.send("transport");
    expect(t.breaker.state).toBe("open");
  });

  it("applies new trip thresholds to a closed breaker", () => {
    const t = setup();
    t.sendAll(times(2, "transport"));
    t.breaker.updatePolicy({ consecutiveFailures: 3 });
    expect(t.breaker.policy.consecutiveFailures).toBe(3);
    t.sendAll(times(2, "transport"));
    expect(t.breaker.state).toBe("closed");
    t.send("transport");
    expect(t.breaker.state).toBe("open");
  });

  it("accepts outcomes of requests admitted before the update", () => {
    const t = setup({ consecutiveFailures: 1 });
    const permit = t.breaker.acquire() as BreakerPermit;
    t.breaker.updatePolicy({ consecutiveFailures: 2 });
    t.breaker.record(permit, "transport");
    t.send("transport");
    expect(t.breaker.state).toBe("open");
  });

  it("keeps a half-open breaker's probes and applies the new success count", () => {
    const t = tripped();
    t.clock.advance(30_000);
    const probe = t.breaker.acquire() as BreakerPermit;
    t.breaker.updatePolicy({ halfOpenSuccesses: 1 });
    expect(t.breaker.inspect()).toMatchObject({ state: "half-open", probesInFlight: 1 });
    t.breaker.record(probe, "success");
    expect(t.breaker.state).toBe("closed");
  });
});
