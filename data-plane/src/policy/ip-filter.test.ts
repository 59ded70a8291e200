import { describe, expect, it } from "vitest";
import { compileFor, policyRequest, run } from "../testing/policy-fixture.js";
import { ipFilter } from "./ip-filter.js";

const DENIED = { kind: "error", code: "CLAWGATE_IP_DENIED" };

describe("ip-filter policy", () => {
  it("is not compiled without ipAllow or ipDeny", () => {
    expect(compileFor(ipFilter, {})).toBeUndefined();
  });

  it.each([
    // peer, expected answer
    ["192.0.2.7", DENIED],
    ["::ffff:192.0.2.7", DENIED], // an IPv4 peer on a dual-stack socket
    ["2001:db8::1", DENIED],
    ["10.1.2.3", undefined],
    ["10.9.9.9", DENIED], // allowed block, but denied first
    ["198.51.100.1", DENIED], // outside ipAllow
    ["fd00::1", undefined],
  ])("peer %s", (peer, expected) => {
    const policy = compileFor(ipFilter, {
      ipDeny: ["192.0.2.0/24", "2001:db8::/32", "10.9.0.0/16"],
      ipAllow: ["10.0.0.0/8", "fd00::/8"],
    });
    expect(run(policy, policyRequest({ peer }))).toEqual(expected);
  });

  it("with ipDeny alone lets every other address in", () => {
    const policy = compileFor(ipFilter, { ipDeny: ["127.0.0.1"] });
    expect(run(policy, policyRequest({ peer: "127.0.0.1" }))).toEqual(DENIED);
    expect(run(policy, policyRequest({ peer: "127.0.0.2" }))).toBeUndefined();
  });
});
