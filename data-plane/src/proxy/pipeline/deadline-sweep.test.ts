import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type DeadlineEntry, DeadlineSweep } from "./deadline-sweep.js";

/** An entry that records when it expired, on the test's clock. */
function entry(log: string[], name: string, now: () => number): DeadlineEntry {
  return {
    deadline: 0,
    prev: undefined,
    next: undefined,
    list: undefined,
    expired: () => log.push(`${name}@${now()}`),
  };
}

describe("DeadlineSweep", () => {
  let time = 0;
  const now = () => time;
  beforeEach(() => {
    time = 0;
    vi.useFakeTimers();
  });
  afterEach(() => vi.useRealTimers());
  function advance(ms: number): void {
    for (let i = 0; i < ms; i++) {
      time += 1;
      vi.advanceTimersByTime(1);
    }
  }

  it("expires each entry at its own deadline with one timer per duration", () => {
    const sweep = new DeadlineSweep(now);
    const log: string[] = [];
    const entries = Array.from({ length: 100 }, (_, i) => entry(log, `e${i}`, now));
    for (const [i, e] of entries.entries()) {
      if (i === 50) advance(10);
      sweep.add(e, 1_000);
    }
    sweep.add(entry(log, "long", now), 5_000);
    expect(sweep.timers).toBe(2);
    expect(vi.getTimerCount()).toBe(2);
    advance(989); // 10 ms passed while adding
    expect(log).toEqual([]);
    advance(1);
    expect(log).toHaveLength(50);
    expect(log.every((line) => line.endsWith("@1000"))).toBe(true);
    advance(10);
    expect(log).toHaveLength(100);
    expect(log[99]).toBe("e99@1010");
    advance(4_000);
    expect(log.at(-1)).toBe("long@5010");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("arms a list's first timer for its entry's rounded-up deadline, so no sweep comes early and finds nothing", () => {
    time = 0.4;
    const sweep = new DeadlineSweep(now);
    const log: string[] = [];
    const armed = vi.spyOn(globalThis, "setTimeout");
    sweep.add(entry(log, "a", now), 100);
    advance(100); // the clock reads 100.4: short of the deadline, 101
    expect(log).toEqual([]);
    advance(1);
    expect(log).toEqual(["a@101.4"]);
    // One timer, armed once: not one for 100 ms that found nothing due and re-armed for 1.
    expect(armed).toHaveBeenCalledTimes(1);
    armed.mockRestore();
  });

  it("forgets removed entries, and its timer lapses once nothing is in flight", () => {
    const sweep = new DeadlineSweep(now);
    const log: string[] = [];
    const [a, b, c] = ["a", "b", "c"].map((name) => entry(log, name, now)) as [
      DeadlineEntry,
      DeadlineEntry,
      DeadlineEntry,
    ];
    sweep.add(a, 100);
    sweep.add(b, 100);
    sweep.add(c, 100);
    sweep.remove(a); // the head
    sweep.remove(a); // twice is harmless
    advance(100);
    expect(log).toEqual(["b@100", "c@100"]);
    sweep.add(a, 100);
    sweep.remove(a);
    advance(200);
    expect(log).toEqual(["b@100", "c@100"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("arms one timer for entries that come and go one at a time, not one per entry", () => {
    const sweep = new DeadlineSweep(now);
    const log: string[] = [];
    const armed = vi.spyOn(globalThis, "setTimeout");
    const cleared = vi.spyOn(globalThis, "clearTimeout");
    // One request in flight at a time, each done in 5 ms: a timer per request was a clear and
    // an arm each time the list emptied and filled again.
    for (let i = 0; i < 100; i++) {
      const one = entry(log, `r${i}`, now);
      sweep.add(one, 1_000);
      advance(5);
      sweep.remove(one);
    }
    expect(armed.mock.calls.length).toBeLessThanOrEqual(2);
    expect(cleared).not.toHaveBeenCalled();
    advance(1_000);
    expect(log).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
    armed.mockRestore();
    cleared.mockRestore();
  });

  it("restarts the deadline of an entry added again while still in a list", () => {
    const sweep = new DeadlineSweep(now);
    const log: string[] = [];
    const [a, b] = ["a", "b"].map((name) => entry(log, name, now)) as [
      DeadlineEntry,
      DeadlineEntry,
    ];
    sweep.add(a, 100);
    sweep.add(b, 100);
    advance(50);
    // Again, as when undici starts the request anew: one entry, due 100 ms from now.
    sweep.add(a, 100);
    advance(50);
    expect(log).toEqual(["b@100"]);
    advance(50);
    expect(log).toEqual(["b@100", "a@150"]);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("DeadlineSweep deadlines", () => {
  /** A pipeline handler's shape: a new one per request, its deadline field starting at 0. */
  class RequestEntry implements DeadlineEntry {
    deadline = 0;
    prev: DeadlineEntry | undefined = undefined;
    next: DeadlineEntry | undefined = undefined;
    list: DeadlineEntry["list"] = undefined;
    expired(): void {}
  }

  // Whole numbers keep a new entry's deadline field inline; a fractional one is boxed in a heap
  // number of its own (16 B a request per deadline: node data-plane/dist/bench/stage-alloc.js).
  it("are whole milliseconds, rounded up so that none expires early", () => {
    let time = 10.25;
    const sweep = new DeadlineSweep(() => time);
    const entry = new RequestEntry();
    sweep.add(entry, 100);
    expect(entry.deadline).toBe(111);
    time = 500;
    sweep.add(entry, 100); // added again: restarted
    expect(entry.deadline).toBe(600);
    sweep.remove(entry);
  });
});
