import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { mainThreadSched, schedBetween } from "./main-thread-sched.js";

describe("mainThreadSched", () => {
  it.skipIf(!existsSync(`/proc/${process.pid}/task/${process.pid}/schedstat`))(
    "reads this process's event loop thread, and a window as the counts' difference",
    () => {
      const from = mainThreadSched(process.pid);
      const to = mainThreadSched(process.pid);
      // The thread has run (it is running this), and counts never fall; the kernel adds the
      // running slice at its next tick, so a short window may read 0.
      expect(from?.runMs).toBeGreaterThan(0);
      expect(from?.slices).toBeGreaterThan(0);
      const window = schedBetween(from, to);
      expect(window?.runMs).toBeGreaterThanOrEqual(0);
      expect(window?.waitMs).toBeGreaterThanOrEqual(0);
      expect(window?.slices).toBeGreaterThanOrEqual(0);
    },
  );

  it("says nothing for a process that is not there", () => {
    expect(mainThreadSched(2 ** 22 + 1)).toBeUndefined();
    expect(schedBetween(undefined, { runMs: 1, waitMs: 0, slices: 1 })).toBeUndefined();
  });
});
