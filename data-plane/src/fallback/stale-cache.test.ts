import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { StaleCache } from "./stale-cache.js";

const body = (n: number) => Buffer.alloc(n, 1);

describe("StaleCache", () => {
  it("serves an entry until it is older than the allowed age, then drops it", () => {
    const clock = new FakeClock(1_000);
    const cache = new StaleCache({ clock });
    cache.set("k", 200, ["content-type", "text/plain"], Buffer.from("hi"));
    clock.advance(5_000);
    const entry = cache.get("k", 5_000);
    expect(entry?.body.toString()).toBe("hi");
    expect(cache.ageSeconds(entry!)).toBe(5);
    clock.advance(1);
    expect(cache.get("k", 5_000)).toBeUndefined();
    expect(cache.size).toBe(0);
    expect(cache.totalBytes).toBe(0);
  });

  it("evicts the oldest stores beyond the entry limit", () => {
    const cache = new StaleCache({ maxEntries: 2 });
    cache.set("a", 200, [], body(1));
    cache.set("b", 200, [], body(1));
    cache.set("a", 200, [], body(1)); // a is now the newest
    cache.set("c", 200, [], body(1));
    expect(cache.get("b", 1e9)).toBeUndefined();
    expect(cache.get("a", 1e9)).toBeDefined();
    expect(cache.get("c", 1e9)).toBeDefined();
  });

  it("evicts beyond the byte limit and refuses a body over the entry limit", () => {
    const cache = new StaleCache({ maxBytes: 100, maxEntryBytes: 60 });
    expect(cache.set("big", 200, [], body(61))).toBe(false);
    cache.set("a", 200, [], body(50));
    cache.set("b", 200, [], body(40));
    expect(cache.totalBytes).toBe(90);
    cache.set("c", 200, [], body(30));
    expect(cache.get("a", 1e9)).toBeUndefined();
    expect(cache.totalBytes).toBe(70);
    expect(cache.size).toBe(2);
  });
});
