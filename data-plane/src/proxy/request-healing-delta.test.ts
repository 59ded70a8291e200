import pino from "pino";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { compileDelta } from "../compiler/compile-delta.js";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompileResult } from "../compiler/compiled-types.js";
import { FrozenCompiledSnapshot } from "../compiler/frozen-compiled-snapshot.js";
import { deltaOf, snapshotOf, upstreamAt } from "../testing/delta-fixture.js";
import { RequestHealing } from "./request-healing.js";

function compiled(result: CompileResult): FrozenCompiledSnapshot {
  if (!result.ok) throw new Error(result.reason);
  if (!(result.value instanceof FrozenCompiledSnapshot)) throw new Error("not a compiled snapshot");
  return result.value;
}

function healing(): RequestHealing {
  return new RequestHealing({ registry: new Registry(), logger: pino({ level: "silent" }) });
}

/** Opens the upstream's breaker with consecutive transport failures. */
function trip(h: RequestHealing, upstream: string): void {
  const breaker = h.upstream(upstream)!.breaker;
  for (let i = 0; i < 10 && breaker.state === "closed"; i++) {
    const permit = breaker.acquire();
    if (permit.ok) breaker.record(permit, "transport");
  }
  expect(breaker.state).toBe("open");
}

describe("RequestHealing.syncChanged", () => {
  it("remakes only the upstreams a delta changed; the others keep breakers and cooldowns", () => {
    const h = healing();
    const base = compiled(compileSnapshot(snapshotOf(1, 20, 8)));
    h.sync(base);
    trip(h, "u-1");
    h.upstream("u-2")!.cooldown.blockFor(60_000);
    trip(h, "u-3");
    const untouched = h.upstream("u-4");
    const changedBefore = h.upstream("u-3");

    const next = compiled(
      compileDelta(base, deltaOf(2, { upstreams: [upstreamAt(3, 4, 1), upstreamAt(8, 2)] })),
    );
    expect(h.syncChanged(base, next, next.changes!.upstreams)).toBe(true);

    // Untouched: the very same records, breaker still open, cooldown still binding.
    expect(h.upstream("u-1")!.breaker.state).toBe("open");
    expect(h.upstream("u-2")!.cooldown.check().ok).toBe(false);
    expect(h.upstream("u-4")).toBe(untouched);
    // Changed: a new record over the new nodes, its breaker's state kept.
    const changed = h.upstream("u-3")!;
    expect(changed).not.toBe(changedBefore);
    expect(changed.breaker).toBe(changedBefore!.breaker);
    expect(changed.breaker.state).toBe("open");
    const nodes = next.upstreams.get("u-3")!.nodes.map((n) => n.address);
    expect(nodes).toContain(changed.picker.pick()?.address);
    // Added: a record of its own.
    expect(h.upstream("u-8")?.breaker.state).toBe("closed");

    // Removed by the next delta: its breaker and record are gone.
    const after = compiled(compileDelta(next, deltaOf(3, { removedUpstreams: ["u-8"] })));
    expect(h.syncChanged(next, after, after.changes!.upstreams)).toBe(true);
    expect(h.upstream("u-8")).toBeUndefined();
    expect(h.breakers.find("u-8")).toBeUndefined();
    expect(h.upstream("u-1")!.breaker.state).toBe("open");
  });

  it("declines when the delta's base is not what it synced last: the caller syncs whole", () => {
    const h = healing();
    const base = compiled(compileSnapshot(snapshotOf(1, 20, 8)));
    const other = compiled(compileSnapshot(snapshotOf(1, 20, 8)));
    h.sync(other);
    const next = compiled(compileDelta(base, deltaOf(2, { upstreams: [upstreamAt(3, 4, 1)] })));
    expect(h.syncChanged(base, next, next.changes!.upstreams)).toBe(false);
    expect(h.upstream("u-3")!.picker.pick()?.address).not.toContain("127.2.3.4");
  });
});
