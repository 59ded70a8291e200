import { createHash } from "node:crypto";
import { create, RouteSchema, SnapshotSchema, TenantSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { deltaOf } from "../testing/delta-fixture.js";
import { policyRequest, run } from "../testing/policy-fixture.js";
import { compileDelta } from "./compile-delta.js";
import { compileSnapshot } from "./compile-snapshot.js";
import type { CompileResult } from "./compiled-types.js";
import { FrozenCompiledSnapshot } from "./frozen-compiled-snapshot.js";

const sha = (key: string) => createHash("sha256").update(key).digest("hex");

function compiled(result: CompileResult): FrozenCompiledSnapshot {
  if (!result.ok) throw new Error(result.reason);
  if (!(result.value instanceof FrozenCompiledSnapshot)) throw new Error("not a compiled snapshot");
  return result.value;
}

/** The tenant auth names on route "api" of `snapshot` for `key`, or the error it answers. */
function authAs(snapshot: FrozenCompiledSnapshot, key: string): string {
  const route = snapshot.match("GET", "", "/api", {})!;
  const request = policyRequest({
    headers: { "x-api-key": key },
    tenantKeys: snapshot.tenantKeys,
  });
  for (const policy of route.policies) {
    const answer = run(policy, request);
    if (answer !== undefined) return answer.kind === "error" ? answer.code : "answered";
  }
  return request.tenant?.name ?? "nobody";
}

// Auth routes find keys in the snapshot's one key index: a delta that only changes a tenant
// (a key rotated, a tenant removed) must reach routes it does not carry.
describe("compileDelta and tenants", () => {
  it("a changed or removed tenant is seen by auth routes the delta does not carry", () => {
    const base = compiled(
      compileSnapshot(
        create(SnapshotSchema, {
          version: 1n,
          upstreams: [{ name: "u", nodes: [{ address: "127.0.0.1:1", weight: 1 }] }],
          routes: [
            {
              name: "api",
              match: { pathPrefix: "/api" },
              upstream: "u",
              auth: { tenants: "required" },
            },
          ],
          tenants: [
            { name: "alpha", apiKeySha256: [sha("old")] },
            { name: "beta", apiKeySha256: [sha("b")] },
          ],
        }),
      ),
    );
    expect(authAs(base, "old")).toBe("alpha");

    const rotated = compiled(
      compileDelta(
        base,
        deltaOf(2, {
          tenants: [create(TenantSchema, { name: "alpha", apiKeySha256: [sha("new")] })],
        }),
      ),
    );
    expect(authAs(rotated, "new")).toBe("alpha");
    expect(authAs(rotated, "old")).toBe("CLAWGATE_UNAUTHORIZED");
    expect(authAs(rotated, "b")).toBe("beta");

    const removed = compiled(compileDelta(rotated, deltaOf(3, { removedTenants: ["beta"] })));
    expect(authAs(removed, "b")).toBe("CLAWGATE_UNAUTHORIZED");
    expect(authAs(removed, "new")).toBe("alpha");
  });

  it("a route that gains auth in a delta is reached by the next tenant change", () => {
    const route = { name: "api", match: { pathPrefix: "/api" }, upstream: "u" };
    const base = compiled(
      compileSnapshot(
        create(SnapshotSchema, {
          version: 1n,
          upstreams: [{ name: "u", nodes: [{ address: "127.0.0.1:1", weight: 1 }] }],
          routes: [route],
          tenants: [{ name: "alpha", apiKeySha256: [sha("old")] }],
        }),
      ),
    );
    expect(authAs(base, "old")).toBe("nobody");
    const guarded = compiled(
      compileDelta(
        base,
        deltaOf(2, { routes: [create(RouteSchema, { ...route, auth: { tenants: "required" } })] }),
      ),
    );
    expect(authAs(guarded, "old")).toBe("alpha");
    const rotated = compiled(
      compileDelta(
        guarded,
        deltaOf(3, {
          tenants: [create(TenantSchema, { name: "alpha", apiKeySha256: [sha("new")] })],
        }),
      ),
    );
    expect(authAs(rotated, "new")).toBe("alpha");
    expect(authAs(rotated, "old")).toBe("CLAWGATE_UNAUTHORIZED");
  });
});
