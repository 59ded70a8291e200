import { describe, expect, it } from "vitest";
import { OneAtATime } from "./one-at-a-time.js";

/** A promise the test settles by hand. */
function deferred() {
  let resolve: () => void = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe("OneAtATime", () => {
  it("lets a promote or abort wait for a check in progress instead of failing, and skips a check meanwhile", async () => {
    const turns = new OneAtATime();
    const order: string[] = [];
    const check = deferred();
    const first = turns.runUnlessBusy(async () => {
      order.push("check started");
      await check.promise;
      order.push("check ended");
    });
    expect(first).toBeDefined();
    const ending = turns.run(async () => {
      order.push("abort");
      return "aborted";
    });
    // The next periodic check finds work running or waiting, and skips its turn.
    expect(turns.runUnlessBusy(async () => order.push("second check"))).toBeUndefined();
    check.resolve();
    expect(await ending).toBe("aborted");
    expect(order).toEqual(["check started", "check ended", "abort"]);
    expect(turns.busy).toBe(false);
  });

  it("runs the next work after one that failed", async () => {
    const turns = new OneAtATime();
    await expect(turns.run(async () => Promise.reject(new Error("store down")))).rejects.toThrow(
      "store down",
    );
    expect(await turns.run(async () => "ran")).toBe("ran");
    expect(turns.busy).toBe(false);
  });
});
