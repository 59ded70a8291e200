import { afterEach, describe, expect, it, vi } from "vitest";
import { DnsRefresh } from "./dns-refresh.js";

/** A resolver whose answers the test sets: a list of addresses, or an error. */
function scriptedResolver() {
  const answers = new Map<string, string[] | Error>();
  return {
    answers,
    resolver: {
      lookup: undefined,
      resolveAll: async (host: string) => {
        const answer = answers.get(host);
        if (answer instanceof Error) throw answer;
        return [...(answer ?? [])].sort();
      },
    },
  };
}

describe("DnsRefresh", () => {
  afterEach(() => vi.useRealTimers());

  it("names the nodes of a name whose address set changed, and only then", async () => {
    vi.useFakeTimers();
    const { answers, resolver } = scriptedResolver();
    const changed: string[][] = [];
    const failed: string[] = [];
    const refresh = new DnsRefresh({
      resolver,
      refreshMs: 1_000,
      changed: (addresses) => changed.push([...addresses]),
      failed: (host) => failed.push(host),
    });
    answers.set("api.test", ["10.0.0.1", "10.0.0.2"]);
    refresh.watch("api.test:80");
    refresh.watch("api.test:443");
    // IP literals have nothing to re-resolve.
    refresh.watch("10.9.9.9:80");
    await vi.advanceTimersByTimeAsync(1_000);
    expect(changed).toEqual([]);

    // The same set in another order is no change.
    answers.set("api.test", ["10.0.0.2", "10.0.0.1"]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(changed).toEqual([]);

    // A failed answer keeps the last good one: no change, the failure reported.
    answers.set("api.test", new Error("ETIMEOUT"));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(changed).toEqual([]);
    expect(failed).toEqual(["api.test"]);

    answers.set("api.test", ["10.0.0.3"]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(changed).toEqual([["api.test:80", "api.test:443"]]);

    // Unwatched, a name is asked no more.
    refresh.unwatch("api.test:80");
    refresh.unwatch("api.test:443");
    answers.set("api.test", ["10.0.0.4"]);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(changed).toHaveLength(1);
    refresh.close();
  });

  it("does nothing with a refresh of 0", async () => {
    vi.useFakeTimers();
    const { answers, resolver } = scriptedResolver();
    let asked = 0;
    const refresh = new DnsRefresh({
      resolver: {
        lookup: undefined,
        resolveAll: async (host) => {
          asked++;
          return resolver.resolveAll(host);
        },
      },
      refreshMs: 0,
      changed: () => {},
    });
    answers.set("api.test", ["10.0.0.1"]);
    refresh.watch("api.test:80");
    await vi.advanceTimersByTimeAsync(60_000);
    expect(asked).toBe(0);
  });
});
