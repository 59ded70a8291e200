import { describe, expect, it } from "vitest";
import { StopWaiting, waitFor } from "./wait-for.js";

describe("waitFor", () => {
  it("resolves with the first truthy value, treating throws as not yet", async () => {
    let calls = 0;
    const value = await waitFor(
      () => {
        calls++;
        if (calls < 3) throw new Error("not yet");
        return calls === 4 ? "done" : false;
      },
      { what: "the fourth call", intervalMs: 1 },
    );
    expect(value).toBe("done");
    expect(calls).toBe(4);
  });

  it("names what it waited for and the last error when it times out", async () => {
    await expect(
      waitFor(
        () => {
          throw new Error("connection refused");
        },
        { what: "the admin API", timeoutMs: 20, intervalMs: 5 },
      ),
    ).rejects.toThrow(/waiting for the admin API \(last error: connection refused\)/);
  });

  it("gives up at once on StopWaiting", async () => {
    let calls = 0;
    await expect(
      waitFor(
        () => {
          calls++;
          throw new StopWaiting("process exited");
        },
        { what: "readiness", timeoutMs: 5_000 },
      ),
    ).rejects.toThrow(/gave up waiting for readiness: process exited/);
    // Asked once, not polled until the timeout.
    expect(calls).toBe(1);
  });
});
