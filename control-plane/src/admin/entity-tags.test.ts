import { describe, expect, it } from "vitest";
import { etag, noneMatchHolds, parseIfNoneMatch } from "./entity-tags.js";

describe("If-None-Match", () => {
  it.each<[string | string[] | undefined, ReturnType<typeof parseIfNoneMatch>]>([
    [undefined, undefined],
    ["", undefined],
    ["*", "*"],
    [' "12" ', [12]],
    ['W/"12"', [12]],
    ['"3", W/"12" ,"x", "12a", 7', [3, 12, 7]],
    [
      ['"3"', 'W/"4"'],
      [3, 4],
    ],
    ['"abc"', []],
  ])("reads %j", (header, expected) => {
    expect(parseIfNoneMatch(header)).toEqual(expected);
  });

  it("matches a listed revision or, for *, any existing resource", () => {
    expect(noneMatchHolds([3, 12], 12)).toBe(true);
    expect(noneMatchHolds([3, 12], 13)).toBe(false);
    expect(noneMatchHolds("*", 1)).toBe(true);
    expect(noneMatchHolds("*", undefined)).toBe(false);
    expect(noneMatchHolds([12], undefined)).toBe(false);
    expect(etag(12)).toBe('"12"');
  });
});
