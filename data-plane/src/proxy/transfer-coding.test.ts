import { describe, expect, it } from "vitest";
import { unsupportedTransferCoding } from "./transfer-coding.js";

describe("unsupportedTransferCoding", () => {
  it.each([[undefined], ["chunked"], ["Chunked"], ["CHUNKED"], [" chunked "], ["chunked\t"]])(
    "lets %s through",
    (value) => {
      expect(unsupportedTransferCoding(value)).toBe(false);
    },
  );

  it.each([
    ["gzip, chunked"],
    ["deflate,chunked"],
    ["x-custom, chunked"],
    ["identity, chunked"],
    ["gzip"],
    ["chunked, gzip"],
    [", chunked"],
    ["chunkedx"],
    [""],
  ])("refuses %s", (value) => {
    expect(unsupportedTransferCoding(value)).toBe(true);
  });
});
