import { describe, expect, it } from "vitest";
import { HEALTHY_RUN_MS, MAX_RESTART_DELAY_MS, RestartBackoff } from "./restart-backoff.js";

describe("RestartBackoff", () => {
  it("restarts a worker dead after a healthy run at once, then doubles from 100 ms to 30 s", () => {
    const backoff = new RestartBackoff();
    // The first worker served long; each replacement died before it listened (0 ms served).
    const delays = [HEALTHY_RUN_MS, ...Array<number>(12).fill(0)].map((served) =>
      backoff.died(served),
    );
    expect(delays).toEqual([
      0, 100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000, 30_000, 30_000,
    ]);
  });

  it("the first death of all restarts at once, even a worker that never listened", () => {
    expect(new RestartBackoff().died(0)).toBe(0);
  });

  it("starts over once a worker served a healthy run", () => {
    const backoff = new RestartBackoff();
    const schedule = [
      [0, 0],
      [0, 100],
      [0, 200],
      [HEALTHY_RUN_MS - 1, 400],
      // Up long enough: whatever killed the others passed.
      [HEALTHY_RUN_MS, 0],
      [10, 100],
      [HEALTHY_RUN_MS * 10, 0],
    ] as const;
    for (const [served, delay] of schedule) expect(backoff.died(served)).toBe(delay);
  });

  it("never waits longer than the cap however long the streak", () => {
    const backoff = new RestartBackoff();
    let last = 0;
    for (let i = 0; i < 2_000; i++) last = backoff.died(0);
    expect(last).toBe(MAX_RESTART_DELAY_MS);
  });

  it("takes other delays as options", () => {
    const backoff = new RestartBackoff({ firstDelayMs: 5, maxDelayMs: 12, healthyRunMs: 50 });
    expect([0, 0, 0, 0, 50, 0].map((served) => backoff.died(served))).toEqual([0, 5, 10, 12, 0, 5]);
  });
});
