import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { KeyedCooldowns } from "./keyed-cooldowns.js";
import { Cooldown } from "./retry-after-gate.js";

/** A FakeClock that counts its reads: each is a performance.now() call on the real clock. */
class CountingClock extends FakeClock {
  reads = 0;
  override now(): number {
    this.reads++;
    return super.now();
  }
}

// Every request checks its upstream's cooldown and, for the node pick, its nodes' cooldowns;
// almost no upstream ever sent a Retry-After, so those checks must not cost a clock read each.
describe("cooldown checks before any Retry-After", () => {
  it("pass without reading the clock, and read it once something was blocked", () => {
    const clock = new CountingClock(1_000);
    const cooldown = new Cooldown(clock);
    const keyed = new KeyedCooldowns(clock);
    for (let i = 0; i < 100; i++) {
      expect(cooldown.check()).toEqual({ ok: true });
      expect(keyed.active()).toBe(false);
      expect(keyed.check("10.0.0.1:80")).toEqual({ ok: true });
    }
    expect(clock.reads).toBe(0);

    cooldown.blockFor(5_000);
    keyed.blockFor("10.0.0.1:80", 2_000);
    expect(cooldown.check()).toEqual({ ok: false, retryAfterMs: 5_000 });
    expect(keyed.check("10.0.0.1:80")).toEqual({ ok: false, retryAfterMs: 2_000 });
    clock.advance(5_000);
    expect(cooldown.check()).toEqual({ ok: true });
    expect(keyed.active()).toBe(false);
    expect(clock.reads).toBeGreaterThan(0);
  });
});
