import { describe, expect, it, vi } from "vitest";
import { DrainDelay } from "./drain-delay.js";

describe("DrainDelay", () => {
  it("resolves once the delay has passed, not before", async () => {
    vi.useFakeTimers();
    try {
      const delay = new DrainDelay();
      let done = false;
      const waited = delay.wait(5_000).then(() => {
        done = true;
      });
      expect(delay.waiting).toBe(true);
      await vi.advanceTimersByTimeAsync(4_999);
      expect(done).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await waited;
      expect(done).toBe(true);
      expect(delay.waiting).toBe(false);
      // Nothing is left to skip once it has run out.
      expect(delay.skip()).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });

  it("ends early on skip(), which says whether there was a pause to end", async () => {
    const delay = new DrainDelay();
    expect(delay.skip()).toBe(false);
    const waited = delay.wait(600_000);
    expect(delay.skip()).toBe(true);
    await waited;
    expect(delay.waiting).toBe(false);
    expect(delay.skip()).toBe(false);
  });

  it("does not pause at all for 0", async () => {
    const delay = new DrainDelay();
    const waited = delay.wait(0);
    expect(delay.waiting).toBe(false);
    await waited;
  });
});
