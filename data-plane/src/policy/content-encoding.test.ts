import { describe, expect, it } from "vitest";
import { compileFor, policyRequest, run } from "../testing/policy-fixture.js";
import { contentEncoding } from "./content-encoding.js";

const REFUSED = { kind: "error", code: "CLAWGATE_UNSUPPORTED_MEDIA_TYPE" };

describe("content-encoding policy", () => {
  const policy = compileFor(contentEncoding, { usage: { injectStreamUsage: true } });
  const declared = (coding: string, length = "10") =>
    policyRequest({
      method: "POST",
      headers: { "content-encoding": coding, "content-length": length },
    });

  it("is compiled only for a route with usage.injectStreamUsage", () => {
    expect(compileFor(contentEncoding, {})).toBeUndefined();
    expect(compileFor(contentEncoding, { usage: { injectStreamUsage: false } })).toBeUndefined();
    expect(policy).toBeDefined();
  });

  it.each([
    "gzip",
    "br",
    "deflate",
    "zstd",
    "x-unknown",
    "GZIP",
    "gzip, identity",
    "identity, br",
    "identity,gzip",
  ])("answers 415 to a declared body encoded %j", (coding) => {
    expect(run(policy, declared(coding))).toEqual(REFUSED);
  });

  it("answers 415 to a chunked body with a Content-Encoding", () => {
    const chunked = policyRequest({
      method: "POST",
      headers: { "content-encoding": "gzip", "transfer-encoding": "chunked" },
    });
    expect(run(policy, chunked)).toEqual(REFUSED);
  });

  it.each(["identity", "IDENTITY", "identity, identity", " identity ", ""])(
    "lets a body encoded %j through: it is the bytes the gateway reads",
    (coding) => {
      expect(run(policy, declared(coding))).toBeUndefined();
    },
  );

  it("lets a request without a body through, whatever its Content-Encoding", () => {
    expect(run(policy, declared("gzip", "0"))).toBeUndefined();
    expect(run(policy, declared("gzip", "00"))).toBeUndefined();
    expect(run(policy, policyRequest({ headers: { "content-encoding": "gzip" } }))).toBeUndefined();
  });

  it("lets a body without a Content-Encoding through", () => {
    const plain = policyRequest({ method: "POST", headers: { "content-length": "10" } });
    expect(run(policy, plain)).toBeUndefined();
  });
});
