import { describe, expect, it } from "vitest";
import { isValidHostValue } from "./host-field.js";

const label = (n: number) => "a".repeat(n);
/** A name of exactly `length` characters: labels of 63 joined by dots. */
function nameOf(length: number): string {
  let name = "";
  while (name.length < length) name += name === "" ? "a" : name.length % 64 === 63 ? "." : "a";
  return name;
}

describe("isValidHostValue", () => {
  it.each([
    ["api.example.com"],
    ["api.example.com:8080"],
    ["api.example.com."],
    ["localhost"],
    ["[::1]:8080"],
    [""],
    [`${label(63)}.example.com`],
    [nameOf(253)],
    [`${nameOf(253)}.`],
    [`${nameOf(253)}:443`],
  ])("accepts %s", (host) => {
    expect(isValidHostValue(host)).toBe(true);
  });

  // Review 20c, Medium 4: a 16 KB Host of 8,000 labels cost ~150 ms of CPU in the wildcard match.
  it.each([
    ["a name over 253 characters", nameOf(254)],
    ["a name over 253 characters with a trailing dot", `${nameOf(254)}.`],
    ["a 16 KB name of 8,000 labels", "a.".repeat(8_000) + "example.com"],
    ["an empty label", "a..example.com"],
    ["a leading dot", ".example.com"],
    ["only a dot", "."],
    ["a label over 63 characters", `${label(64)}.example.com`],
    ["a last label over 63 characters", `example.${label(64)}`],
    ["a bad port", "example.com:65536"],
  ])("refuses %s", (_what, host) => {
    expect(isValidHostValue(host)).toBe(false);
  });
});
