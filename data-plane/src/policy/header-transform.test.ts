import { describe, expect, it } from "vitest";
import { compileFor, policyRequest, run, services } from "../testing/policy-fixture.js";
import { headerTransform } from "./header-transform.js";

describe("header-transform policy", () => {
  it("is not compiled without transforms, or with empty ones", () => {
    expect(compileFor(headerTransform, {})).toBeUndefined();
    expect(compileFor(headerTransform, { requestHeaders: {} })).toBeUndefined();
  });

  it("removes every value of a removed header and replaces those it sets", () => {
    const policy = compileFor(headerTransform, {
      requestHeaders: { set: { "x-env": "prod" }, remove: ["cookie"] },
    });
    const request = policyRequest({ headers: { cookie: "a=1", "x-env": "dev", accept: "*/*" } });
    expect(run(policy, request)).toBeUndefined();
    expect(request.headers).toEqual(["accept", "*/*", "x-env", "prod"]);
  });

  it("edits the response head before the client gets it", () => {
    const policy = compileFor(headerTransform, {
      responseHeaders: { set: { "x-frame-options": "DENY" }, remove: ["server"] },
    })!;
    const headers: Record<string, string> = {
      server: "upstream/1.0",
      "content-type": "text/plain",
    };
    policy.onResponse?.(policyRequest(), 200, headers, services);
    expect(headers).toEqual({ "content-type": "text/plain", "x-frame-options": "DENY" });
  });
});
