import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { parseRetryAfter, RetryAfterGate } from "./retry-after-gate.js";

describe("RetryAfterGate", () => {
  it("blocks until the deadline, then lets requests through", () => {
    const clock = new FakeClock(10_000);
    const gate = new RetryAfterGate(clock);
    expect(gate.check("a")).toEqual({ ok: true });
    gate.block("a", 130_000);
    const steps: [advanceMs: number, expected: unknown][] = [
      [0, { ok: false, retryAfterMs: 120_000 }],
      [119_999, { ok: false, retryAfterMs: 1 }],
      [1, { ok: true }],
    ];
    for (const [advance, expected] of steps) {
      clock.advance(advance);
      expect(gate.check("a")).toEqual(expected);
    }
    expect(gate.check("b")).toEqual({ ok: true });
  });

  it("an earlier deadline never shortens a later one", () => {
    const clock = new FakeClock(0);
    const gate = new RetryAfterGate(clock);
    gate.blockFor("a", 60_000);
    gate.blockFor("a", 5_000);
    expect(gate.check("a")).toEqual({ ok: false, retryAfterMs: 60_000 });
    gate.block("a", 90_000);
    expect(gate.check("a")).toEqual({ ok: false, retryAfterMs: 90_000 });
  });

  it("binds even when the breaker would probe earlier: it is independent of any breaker", () => {
    const clock = new FakeClock(0);
    const gate = new RetryAfterGate(clock);
    gate.blockFor("a", 120_000);
    clock.advance(30_000); // a default breaker's cooldown is over here
    expect(gate.check("a")).toEqual({ ok: false, retryAfterMs: 90_000 });
  });

  it("retain forgets upstreams gone from the snapshot", () => {
    const gate = new RetryAfterGate(new FakeClock(0));
    gate.blockFor("a", 1_000);
    gate.blockFor("b", 1_000);
    gate.retain(["b"]);
    expect(gate.check("a")).toEqual({ ok: true });
    expect(gate.check("b").ok).toBe(false);
  });
});

describe("parseRetryAfter", () => {
  const now = Date.UTC(2026, 0, 15, 12, 0, 0); // Thu, 15 Jan 2026 12:00:00 GMT
  const rows: [value: string | undefined, expected: number | undefined][] = [
    [undefined, undefined],
    ["", undefined],
    ["   ", undefined],
    ["120", 120_000],
    ["0", 0],
    ["  30 ", 30_000],
    ["\t5\t", 5_000],
    ["007", 7_000],
    ["3600", 3_600_000],
    ["3601", 3_600_000],
    ["99999999999999999999999", 3_600_000],
    ["-5", undefined],
    ["+5", undefined],
    ["1.5", undefined],
    ["1e3", undefined],
    ["12abc", undefined],
    ["abc", undefined],
    ["0x10", undefined],
    ["1 2", undefined],
    ["Thu, 15 Jan 2026 12:02:00 GMT", 120_000],
    [" Thu, 15 Jan 2026 12:00:30 GMT ", 30_000],
    ["thu, 15 jan 2026 12:00:30 gmt", 30_000],
    ["Thu, 15 Jan 2026 11:59:00 GMT", 0],
    ["Fri, 16 Jan 2026 12:00:00 GMT", 3_600_000],
    ["Thursday, 15-Jan-26 12:01:00 GMT", 60_000],
    ["Thu Jan 15 12:00:10 2026", 10_000],
    ["Thu Jan  1 12:00:10 2026", 0],
    ["Thu, 15 Jan 2026 12:02:00 UTC", undefined],
    ["Thu, 15 Jan 2026 12:02 GMT", undefined],
    ["Thu, 31 Feb 2026 12:02:00 GMT", undefined],
    ["Thu, 15 Jan 2026 24:00:00 GMT", undefined],
    ["Thu, 15 Foo 2026 12:02:00 GMT", undefined],
    ["2026-01-15T12:02:00Z", undefined],
    ["1", 1_000],
  ];
  for (const [value, expected] of rows) {
    it(`${JSON.stringify(value)} -> ${expected}`, () => {
      expect(parseRetryAfter(value, now)).toBe(expected);
    });
  }

  it("takes a custom cap", () => {
    expect(parseRetryAfter("600", now, 60_000)).toBe(60_000);
    expect(parseRetryAfter("30", now, 60_000)).toBe(30_000);
  });

  it("reads a two-digit RFC 850 year more than 50 years ahead as the last century", () => {
    expect(parseRetryAfter("Sunday, 06-Nov-94 08:49:37 GMT", now)).toBe(0);
    expect(parseRetryAfter("Sunday, 06-Nov-94 08:49:37 GMT", Date.UTC(1994, 10, 6, 8, 49, 0))).toBe(
      37_000,
    );
  });
});
