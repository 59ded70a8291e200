import { describe, expect, it } from "vitest";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompiledUpstream } from "../compiler/compiled-types.js";
import type { HealthTarget } from "../health/health-targets.js";
import { snapshotOf } from "../testing/delta-fixture.js";
import { HealthSync, TARGETS_AT_ONCE_UPSTREAMS } from "./health-sync.js";

function upstreams(count: number): Map<string, CompiledUpstream> {
  const result = compileSnapshot(snapshotOf(1, count, count));
  if (!result.ok) throw new Error(result.reason);
  return new Map(result.value.upstreams);
}

/** A registry that records what it is handed, in order. */
function recordingRegistry() {
  const calls: Map<string, readonly HealthTarget[]>[] = [];
  return {
    calls,
    syncUpstreams: (changes: ReadonlyMap<string, readonly HealthTarget[]>) => {
      calls.push(new Map(changes));
    },
    synced: async () => {},
  };
}

const failOnError = (err: unknown) => {
  throw err;
};

describe("HealthSync", () => {
  it("hands a small change to the registry in the swap's own turn", () => {
    const registry = recordingRegistry();
    const sync = new HealthSync(registry, failOnError);
    sync.follow(upstreams(3));
    expect(registry.calls).toHaveLength(1);
    expect([...registry.calls[0]!.keys()]).toEqual(["u-0", "u-1", "u-2"]);
    expect(registry.calls[0]!.get("u-1")!.length).toBeGreaterThan(0);
  });

  it("makes a first snapshot's targets after the swap's turn, and says when they are in", async () => {
    const registry = recordingRegistry();
    const sync = new HealthSync(registry, failOnError);
    const all = upstreams(TARGETS_AT_ONCE_UPSTREAMS * 3);
    sync.follow(all);
    // Before, every upstream's targets were made in this turn, the swap's.
    expect(registry.calls).toHaveLength(0);
    await sync.synced();
    expect(registry.calls).toHaveLength(1);
    expect(registry.calls[0]!.size).toBe(all.size);
  });

  it("hands a change that follows one still being made after it, so the newer list wins", async () => {
    const registry = recordingRegistry();
    const sync = new HealthSync(registry, failOnError);
    sync.follow(upstreams(TARGETS_AT_ONCE_UPSTREAMS * 2));
    // The next swap removes u-0: small, but it must not reach the registry first.
    sync.follow(new Map([["u-0", undefined]]));
    expect(registry.calls).toHaveLength(0);
    await sync.synced();
    expect(registry.calls).toHaveLength(2);
    expect(registry.calls[0]!.get("u-0")!.length).toBeGreaterThan(0);
    expect(registry.calls[1]!.get("u-0")).toEqual([]);
  });
});
