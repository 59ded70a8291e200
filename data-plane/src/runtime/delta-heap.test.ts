import { describe, expect, it } from "vitest";
import { deltaOf, routeAt, snapshotOf, upstreamAt } from "../testing/delta-fixture.js";
import { settledHeap } from "../testing/settled-heap.js";
import { AppliedSnapshot } from "./applied-snapshot.js";
import { diffSnapshots } from "./snapshot-diff.js";

const ROUTES = 2_000;
const UPSTREAMS = 200;
const CHANGES = 1_000;
const WARM_UP = 200;

/**
 * Issue 9: memory is bounded by the config, not by the number of deltas applied. Each delta
 * changes a route, every tenth moves an upstream's nodes, every seventh adds a route and drops
 * the one added before; the config stays the same size, so the heap must too.
 */
describe("1,000 deltas", () => {
  it("leave the heap where it was after the first 200", async () => {
    const applied = new AppliedSnapshot();
    const first = applied.apply(snapshotOf(1, ROUTES, UPSTREAMS));
    expect(first.ok).toBe(true);
    let heapAfterWarmUp = 0;
    for (let change = 1; change <= CHANGES; change++) {
      const version = change + 1;
      const extra = ROUTES + change;
      const delta = deltaOf(version, {
        routes: [
          routeAt(change % ROUTES, UPSTREAMS, change),
          ...(change % 7 === 0 ? [routeAt(extra, UPSTREAMS)] : []),
        ],
        upstreams: change % 10 === 0 ? [upstreamAt(change % UPSTREAMS, 3, change % 200)] : [],
        removedRoutes: change % 7 === 0 && change > 7 ? [`r-${extra - 7}`] : [],
      });
      const previous = applied.current();
      const result = applied.applyDelta(delta);
      if (!result.ok) throw new Error(result.reason);
      diffSnapshots(previous, result.value);
      if (change === WARM_UP) heapAfterWarmUp = await settledHeap();
    }
    expect(applied.version()).toBe(CHANGES + 1);
    const heapAtEnd = await settledHeap();
    // Generous: a leak of even one snapshot per delta grows it several times over.
    expect(heapAtEnd).toBeLessThan(heapAfterWarmUp * 1.3);
  });
});
