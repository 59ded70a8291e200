import { describe, expect, it } from "vitest";
import { splitHostPort } from "./listen.js";

describe("listen addresses", () => {
  it("splits bracketed IPv6 hosts", () => {
    expect(splitHostPort("[::1]:9180")).toEqual(["::1", 9180]);
    expect(splitHostPort("127.0.0.1:0")).toEqual(["127.0.0.1", 0]);
  });
});
