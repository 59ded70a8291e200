import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Participants } from "./two-phase-apply.js";
import { WorkerLiveness } from "./worker-liveness.js";

/** Workers 1 and 2 hearing messages, the pings each got, and the workers found hung. */
function watchTwo(maxMissed: number) {
  const alive = new Set([1, 2]);
  const pings = new Map<number, number>();
  const hung: string[] = [];
  const participants: Participants = {
    ids: () => [...alive],
    send: (to, message) => {
      if (message.type === "clawgate:ping") pings.set(to, (pings.get(to) ?? 0) + 1);
    },
  };
  const liveness = new WorkerLiveness({
    participants,
    intervalMs: 1_000,
    maxMissed,
    hung: (worker, reason) => {
      hung.push(`${worker}: ${reason}`);
      // The pool kills it: it hears nothing more.
      alive.delete(worker);
    },
  });
  return { alive, pings, hung, liveness };
}

describe("WorkerLiveness", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("reports a worker that misses maxMissed pings in a row, once, and keeps pinging the rest", () => {
    const { pings, hung, liveness } = watchTwo(3);
    liveness.start();
    for (let tick = 0; tick < 6; tick++) {
      vi.advanceTimersByTime(1_000);
      // Worker 1 answers every ping; worker 2's event loop is stuck.
      liveness.pong(1);
    }
    expect(hung).toEqual(["2: missed 3 pings in a row, 1000 ms apart"]);
    expect(pings.get(2)).toBe(3);
    expect(pings.get(1)).toBe(6);
    liveness.stop();
  });

  it("forgives pings missed while busy once the worker answers again", () => {
    const { hung, liveness } = watchTwo(3);
    liveness.start();
    for (let tick = 0; tick < 10; tick++) {
      vi.advanceTimersByTime(1_000);
      liveness.pong(1);
      // Worker 2 answers every other ping: slow, never two in a row missed past the limit.
      if (tick % 2 === 1) liveness.pong(2);
    }
    expect(hung).toEqual([]);
    liveness.stop();
  });

  it("does not count a worker that died, nor ping after stop", () => {
    const { alive, pings, hung, liveness } = watchTwo(2);
    liveness.start();
    vi.advanceTimersByTime(1_000);
    alive.delete(2);
    liveness.gone(2);
    vi.advanceTimersByTime(5_000);
    expect(pings.get(2)).toBe(1);
    expect(hung).toEqual(["1: missed 2 pings in a row, 1000 ms apart"]);
    liveness.stop();
    const sent = pings.get(1);
    vi.advanceTimersByTime(5_000);
    expect(pings.get(1)).toBe(sent);
  });
});
