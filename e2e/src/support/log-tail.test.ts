import { describe, expect, it } from "vitest";
import { LogTail } from "./log-tail.js";

describe("LogTail.onLine", () => {
  it("sees every complete line, also those the tail has already dropped", () => {
    const tail = new LogTail(2);
    const seen: string[] = [];
    const stop = tail.onLine((line) => seen.push(line));
    tail.push("one\ntw");
    tail.push("o\nthree\nfour\n");
    expect(seen).toEqual(["one", "two", "three", "four"]);
    expect(tail.grep("one")).toEqual([]);

    stop();
    tail.push("five\n");
    expect(seen).toHaveLength(4);
  });
});
