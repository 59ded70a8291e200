import { describe, expect, it } from "vitest";
import { formatHostPort, isLoopback, parseHostPort } from "./host-port.js";

describe("host:port", () => {
  it.each([
    ["127.0.0.1:9180", { host: "127.0.0.1", port: 9180 }],
    ["[::1]:9180", { host: "::1", port: 9180 }],
    ["localhost:0", { host: "localhost", port: 0 }],
  ])("parses %s and formats it back", (text, value) => {
    expect(parseHostPort(text, { allowPortZero: true })).toEqual({ ok: true, value });
    expect(formatHostPort(value)).toBe(text);
  });

  it.each([
    ["8080", { allowPortZero: true }, "must be host:port (IPv6 as [::1]:port)"],
    ["::1:8080", { allowPortZero: true }, "must be host:port (IPv6 as [::1]:port)"],
    ["host:70000", { allowPortZero: true }, "port must be 0-65535"],
    ["host:0", { allowPortZero: false }, "port must be 1-65535"],
  ])("refuses %s (%j)", (text, options, reason) => {
    expect(parseHostPort(text, options)).toEqual({ ok: false, reason });
  });

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
});
