import { create, type Snapshot, SnapshotSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { AppliedSnapshot, type CompiledSnapshot, type CompileResult } from "./applied-snapshot.js";

// A stand-in compiler, so these tests pin the holder's behaviour, not the compiler's.
function fakeCompile(snapshot: Snapshot): CompileResult {
  if (snapshot.routes.some((route) => route.upstream === "missing")) {
    return { ok: false, reason: "route r uses unknown upstream missing", problems: [] };
  }
  const compiled = {
    version: Number(snapshot.version),
    createdAtMs: Number(snapshot.createdAtMs),
    routeCount: snapshot.routes.length,
    nodeAddresses: () => new Set<string>(),
    source: snapshot,
  };
  return { ok: true, value: compiled as unknown as CompiledSnapshot };
}

const good = (version: number) => create(SnapshotSchema, { version: BigInt(version) });
const bad = (version: number) =>
  create(SnapshotSchema, {
    version: BigInt(version),
    routes: [{ name: "r", upstream: "missing" }],
  });

describe("AppliedSnapshot", () => {
  it("serves nothing and reports version 0 before the first snapshot", () => {
    const applied = new AppliedSnapshot({ compile: fakeCompile });
    expect(applied.current()).toBeUndefined();
    expect(applied.state()).toBeUndefined();
    expect(applied.version()).toBe(0);
  });

  it("swaps in a snapshot that compiles and records when", () => {
    let now = 1_000;
    const applied = new AppliedSnapshot({ compile: fakeCompile, now: () => now });
    expect(applied.apply(good(5)).ok).toBe(true);
    now = 2_000;
    const first = applied.current();
    expect(applied.apply(good(6)).ok).toBe(true);
    expect(applied.version()).toBe(6);
    expect(applied.state()?.appliedAtMs).toBe(2_000);
    expect(applied.state()?.source).toBe("control-plane");
    expect(applied.apply(good(7), "cache").ok).toBe(true);
    expect(applied.state()?.source).toBe("cache");
    // A reader that took the old reference keeps a whole, unchanged snapshot.
    expect(first?.version).toBe(5);
  });

  it("keeps the last good snapshot when one fails to compile", () => {
    let now = 1_000;
    const applied = new AppliedSnapshot({ compile: fakeCompile, now: () => now });
    applied.apply(good(5));
    const before = applied.state();
    now = 2_000;
    expect(applied.apply(bad(6))).toEqual({
      ok: false,
      reason: "route r uses unknown upstream missing",
      problems: [],
    });
    expect(applied.state()).toBe(before);
    expect(applied.version()).toBe(5);
  });
});
