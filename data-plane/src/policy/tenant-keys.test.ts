import { createHash } from "node:crypto";
import { create, SnapshotSchema, TenantSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { compileDelta } from "../compiler/compile-delta.js";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { FrozenCompiledSnapshot } from "../compiler/frozen-compiled-snapshot.js";
import { logAmbiguousKeys } from "../runtime/ambiguous-keys-log.js";
import { deltaOf } from "../testing/delta-fixture.js";
import { TenantKeys } from "./tenant-keys.js";

const sha = (key: string) => createHash("sha256").update(key).digest("hex");
const tenant = (name: string, ...keys: string[]) =>
  create(TenantSchema, { name, apiKeySha256: keys.map(sha) });

describe("TenantKeys", () => {
  it("finds the one tenant holding a key, case-insensitively by hash", () => {
    const keys = new TenantKeys([
      tenant("alpha", "a"),
      create(TenantSchema, { name: "beta", apiKeySha256: [sha("b").toUpperCase()] }),
    ]);
    expect(keys.find("a")?.name).toBe("alpha");
    expect(keys.find("b")?.name).toBe("beta");
    expect(keys.find("c")).toBeUndefined();
    expect(keys.ambiguous).toEqual([]);
  });

  // Once the last tenant holding a hash won: zeta, given alpha's hash, was served as alpha's
  // key. Now the key names neither, whichever order the tenants come in.
  it("names no tenant for a hash two tenants hold, and reports them", () => {
    for (const order of [
      [tenant("alpha", "shared", "a"), tenant("zeta", "shared")],
      [tenant("zeta", "shared"), tenant("alpha", "a", "shared")],
    ]) {
      const keys = new TenantKeys(order);
      expect(keys.find("shared")).toBeUndefined();
      expect(keys.find("a")?.name).toBe("alpha");
      expect(keys.ambiguous.map((key) => [...key.tenants].sort())).toEqual([["alpha", "zeta"]]);
    }
  });

  it("is logged once per key index swapped in, not again by deltas that keep it", () => {
    const lines: unknown[] = [];
    const logger = { warn: (fields: unknown) => void lines.push(fields) };
    const first = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        tenants: [tenant("alpha", "shared"), tenant("zeta", "shared")],
      }),
    );
    if (!first.ok || !(first.value instanceof FrozenCompiledSnapshot)) throw new Error("refused");
    logAmbiguousKeys(undefined, first.value, logger);
    expect(lines).toEqual([{ version: 1, tenants: ["alpha", "zeta"] }]);

    const same = compileDelta(first.value, deltaOf(2, { removedRoutes: [] }));
    if (!same.ok) throw new Error(same.reason);
    logAmbiguousKeys(first.value, same.value, logger);
    expect(lines).toHaveLength(1);

    const fixed = compileDelta(
      same.value as FrozenCompiledSnapshot,
      deltaOf(3, { tenants: [tenant("zeta", "z")] }),
    );
    if (!fixed.ok) throw new Error(fixed.reason);
    logAmbiguousKeys(same.value as CompiledSnapshot, fixed.value, logger);
    expect(lines).toHaveLength(1);
    expect(fixed.value.tenantKeys.find("shared")?.name).toBe("alpha");
  });
});
