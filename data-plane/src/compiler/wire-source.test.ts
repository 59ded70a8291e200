import { create, type Snapshot, SnapshotSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { redactedSnapshotJson } from "../admin/redact-snapshot.js";
import { snapshotWithDelta } from "../snapshot-cache/snapshot-with-delta.js";
import {
  compiledView,
  deltaOf,
  requestsFor,
  routeAt,
  snapshotOf,
  upstreamAt,
} from "../testing/delta-fixture.js";
import { compileDelta } from "./compile-delta.js";
import { compileSnapshot } from "./compile-snapshot.js";
import type { CompileResult } from "./compiled-types.js";
import { FrozenCompiledSnapshot } from "./frozen-compiled-snapshot.js";

const ROUTES = 40;
const UPSTREAMS = 6;

function compiled(result: CompileResult): FrozenCompiledSnapshot {
  if (!result.ok) throw new Error(result.reason);
  if (!(result.value instanceof FrozenCompiledSnapshot)) throw new Error("not a compiled snapshot");
  return result.value;
}

/** The delta as a control plane's whole snapshot of its version would carry it. */
function wholeAfter(base: Snapshot, delta: Parameters<typeof snapshotWithDelta>[1]): Snapshot {
  return create(SnapshotSchema, snapshotWithDelta(base, delta));
}

describe("the wire source of a snapshot compiled from deltas", () => {
  it("is the whole snapshot the control plane would send, in /config_dump too, delta after delta", () => {
    let whole = snapshotOf(1, ROUTES, UPSTREAMS);
    let current = compiled(compileSnapshot(snapshotOf(1, ROUTES, UPSTREAMS)));
    const requests = requestsFor(ROUTES + 5);
    // 120 changes: past the point where each map folds its layer into a new base.
    for (let change = 1; change <= 120; change++) {
      const delta = deltaOf(change + 1, {
        routes: [routeAt((change * 3) % (ROUTES + 5), UPSTREAMS, change % 3, `/c${change}`)],
        removedRoutes: change % 4 === 0 ? [`r-${(change * 3 + 1) % (ROUTES + 5)}`] : [],
        upstreams: change % 10 === 0 ? [upstreamAt(change % UPSTREAMS, 2, change)] : [],
      });
      const next = compiled(compileDelta(current, delta));
      const expected = wholeAfter(whole, delta);
      const fromWhole = compiled(compileSnapshot(wholeAfter(whole, delta)));
      expect(redactedSnapshotJson(next.source)).toEqual(redactedSnapshotJson(expected));
      expect(compiledView(next, requests)).toEqual(compiledView(fromWhole, requests));
      expect([...next.upstreams.keys()]).toEqual([...fromWhole.upstreams.keys()]);
      whole = expected;
      current = next;
    }
  });

  it("stays the base's own after the next delta: an older snapshot shows its version", () => {
    const base = compiled(compileSnapshot(snapshotOf(1, ROUTES, UPSTREAMS)));
    const next = compiled(
      compileDelta(
        base,
        deltaOf(2, { routes: [routeAt(ROUTES, UPSTREAMS)], removedRoutes: ["r-3"] }),
      ),
    );
    const later = compiled(compileDelta(next, deltaOf(3, { removedRoutes: ["r-4"] })));
    expect(next.source.version).toBe(2n);
    expect(next.source.routes.map((r) => r.name)).toContain("r-4");
    expect(next.source.routes.map((r) => r.name)).not.toContain("r-3");
    expect(later.source.routes.map((r) => r.name)).not.toContain("r-4");
    expect(base.source.routes).toHaveLength(ROUTES);
    expect(base.source.version).toBe(1n);
    // Put together once per version, and frozen.
    expect(next.source).toBe(next.source);
    expect(Object.isFrozen(next.source.routes)).toBe(true);
  });
});
