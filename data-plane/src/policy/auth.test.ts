import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { compileFor, policyRequest, run } from "../testing/policy-fixture.js";
import { auth } from "./auth.js";

const sha = (key: string) => createHash("sha256").update(key).digest("hex");
const tenants = [
  { name: "alpha", apiKeySha256: [sha("k-alpha")] },
  { name: "beta", apiKeySha256: [sha("k-beta-1"), sha("k-beta-2")], allowedRoutes: ["other"] },
];
const required = () => compileFor(auth, { auth: { tenants: "required" } }, tenants);

describe("auth policy", () => {
  it("is not compiled for a route without auth", () => {
    expect(compileFor(auth, {}, tenants)).toBeUndefined();
  });

  it.each([
    ["no key", {}],
    ["an unknown x-api-key", { "x-api-key": "nope" }],
    ["an unknown bearer", { authorization: "Bearer nope" }],
    ["a Basic authorization", { authorization: "Basic azphbHBoYQ==" }],
  ])("answers 401 to %s", (_what, headers) => {
    expect(run(required(), policyRequest({ tenants, headers }))).toEqual({
      kind: "error",
      code: "CLAWGATE_UNAUTHORIZED",
    });
  });

  it("names the tenant by x-api-key or bearer, drops the key, forwards the tenant", () => {
    for (const headers of [
      { "x-api-key": "k-alpha", accept: "*/*" },
      { authorization: "bearer   k-alpha", accept: "*/*" },
    ]) {
      const request = policyRequest({ tenants, headers });
      expect(run(required(), request)).toBeUndefined();
      expect(request.tenant?.name).toBe("alpha");
      expect(request.headers).toEqual(["accept", "*/*", "x-clawgate-tenant", "alpha"]);
    }
  });

  it("keeps an Authorization meant for the upstream when the key came in x-api-key", () => {
    const request = policyRequest({
      tenants,
      headers: { "x-api-key": "k-alpha", authorization: "Basic dXA6c3RyZWFt" },
    });
    expect(run(required(), request)).toBeUndefined();
    expect(request.headers).toContain("Basic dXA6c3RyZWFt");
    expect(request.headers).not.toContain("k-alpha");
  });

  it("answers 403 to a tenant whose allowedRoutes leave the route out, whichever key", () => {
    for (const key of ["k-beta-1", "k-beta-2"]) {
      const request = policyRequest({ tenants, headers: { "x-api-key": key } });
      expect(run(required(), request)).toEqual({ kind: "error", code: "CLAWGATE_FORBIDDEN" });
      expect(request.tenant).toBeUndefined();
    }
  });

  it("optional: no key goes on as nobody's, a wrong key is still 401", () => {
    const optional = compileFor(auth, { auth: { tenants: "optional" } }, tenants);
    const anonymous = policyRequest();
    expect(run(optional, anonymous)).toBeUndefined();
    expect(anonymous.tenant).toBeUndefined();
    expect(run(optional, policyRequest({ tenants, headers: { "x-api-key": "bad" } }))?.kind).toBe(
      "error",
    );
  });
});
