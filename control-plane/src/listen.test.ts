import { describe, expect, it } from "vitest";
import { isLoopback, splitHostPort } from "./listen.js";

describe("listen addresses", () => {
  it.each([
    ["127.0.0.1:9190", true],
    ["127.1.2.3:9190", true],
    ["localhost:9190", true],
    ["[::1]:9190", true],
    ["0.0.0.0:9190", false],
    ["[::]:9190", false],
    ["10.0.0.5:9190", false],
    ["127.0.0.1.example.com:9190", false],
  ])("%s is loopback: %s", (address, expected) => {
    expect(isLoopback(address)).toBe(expected);
  });

  it("splits bracketed IPv6 hosts", () => {
    expect(splitHostPort("[::1]:9180")).toEqual(["::1", 9180]);
    expect(splitHostPort("127.0.0.1:0")).toEqual(["127.0.0.1", 0]);
  });
});
