import { createHash } from "node:crypto";
import { create, SnapshotSchema, TenantSchema } from "@clawgate/proto";
import { afterEach, describe, expect, it, vi } from "vitest";
import { deltaOf } from "../testing/delta-fixture.js";
import { policyRequest, run } from "../testing/policy-fixture.js";
import { compileDelta } from "./compile-delta.js";
import { compileSnapshot } from "./compile-snapshot.js";
import type { CompileResult } from "./compiled-types.js";
import { FrozenCompiledSnapshot } from "./frozen-compiled-snapshot.js";
import { RouteTable } from "./route-table.js";

const ROUTES = 10_000;
const sha = (key: string) => createHash("sha256").update(key).digest("hex");

function compiled(result: CompileResult): FrozenCompiledSnapshot {
  if (!result.ok) throw new Error(result.reason);
  if (!(result.value instanceof FrozenCompiledSnapshot)) throw new Error("not a compiled snapshot");
  return result.value;
}

function authAs(snapshot: FrozenCompiledSnapshot, path: string, key: string): string {
  const route = snapshot.match("GET", "", path, {})!;
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

afterEach(() => vi.restoreAllMocks());

// A one-tenant change once recompiled every auth route and pushed them all through the route
// table: seconds of blocked proxying at 8,000 routes. The work is counted here, not timed.
describe("a one-tenant delta over 10,000 auth routes", () => {
  it("recompiles no route and leaves the route table as it was", () => {
    const base = compiled(
      compileSnapshot(
        create(SnapshotSchema, {
          version: 1n,
          upstreams: [{ name: "u", nodes: [{ address: "127.0.0.1:1", weight: 1 }] }],
          routes: Array.from({ length: ROUTES }, (_, i) => ({
            name: `r-${i}`,
            match: { pathPrefix: `/r-${i}` },
            upstream: "u",
            auth: { tenants: "required" },
          })),
          tenants: [
            { name: "alpha", apiKeySha256: [sha("old")] },
            { name: "beta", apiKeySha256: [sha("b")] },
          ],
        }),
      ),
    );
    const sample = ["/r-0", "/r-4999", "/r-9999"];
    const routesBefore = sample.map((path) => base.match("GET", "", path, {}));
    const update = vi.spyOn(RouteTable.prototype, "update");

    const rotated = compiled(
      compileDelta(
        base,
        deltaOf(2, {
          tenants: [create(TenantSchema, { name: "alpha", apiKeySha256: [sha("new")] })],
        }),
      ),
    );

    // Routes recompiled and routes the table took out or put in: none.
    expect(rotated.changes?.addedRoutes.length).toBe(0);
    expect(rotated.changes?.removedRoutes.length).toBe(0);
    const routesTouched = update.mock.calls.reduce(
      (n, [out, put]) => n + out.length + put.length,
      0,
    );
    expect(routesTouched).toBe(0);
    // The very compiled routes of the base serve on.
    for (const [i, path] of sample.entries()) {
      expect(rotated.match("GET", "", path, {})).toBe(routesBefore[i]);
    }

    // And they see the change, each through its own snapshot's keys.
    expect(authAs(rotated, "/r-9999", "new")).toBe("alpha");
    expect(authAs(rotated, "/r-0", "old")).toBe("CLAWGATE_UNAUTHORIZED");
    expect(authAs(rotated, "/r-0", "b")).toBe("beta");
    // A request still holding the base keeps the keys it was routed with: one snapshot each.
    expect(authAs(base, "/r-0", "old")).toBe("alpha");
  });
});
