import { describe, expect, it } from "vitest";
import { deltaOf, routeAt, snapshotOf, upstreamAt } from "../testing/delta-fixture.js";
import { AppliedSnapshot } from "./applied-snapshot.js";
import { diffSnapshots } from "./snapshot-diff.js";

function served(applied: AppliedSnapshot) {
  const current = applied.current();
  if (current === undefined) throw new Error("nothing served");
  return current;
}

describe("diffSnapshots", () => {
  it("names nothing for health after a one-route delta, and only that route's nodes for pools", () => {
    const applied = new AppliedSnapshot();
    applied.apply(snapshotOf(1, 40, 8));
    const before = served(applied);
    // r-5 sends to u-5 (three nodes): its pools are the only ones to check.
    applied.applyDelta(deltaOf(2, { routes: [routeAt(5, 8, 9)] }));
    const diff = diffSnapshots(before, served(applied));
    expect([...diff.upstreams.keys()]).toEqual([]);
    expect([...(diff.addresses ?? [])].sort()).toEqual([
      "127.1.5.1:80",
      "127.1.5.2:80",
      "127.1.5.3:80",
    ]);
  });

  it("names a changed upstream and a removed one, with their nodes before and after", () => {
    const applied = new AppliedSnapshot();
    applied.apply(snapshotOf(1, 40, 8));
    const before = served(applied);
    applied.applyDelta(
      deltaOf(2, {
        upstreams: [upstreamAt(2, 1, 1)],
        removedUpstreams: ["u-7"],
        removedRoutes: [
          "r-7",
          "r-15",
          "r-23",
          "r-31",
          "r-39",
          "r-6",
          "r-14",
          "r-22",
          "r-30",
          "r-38",
        ],
      }),
    );
    const diff = diffSnapshots(before, served(applied));
    expect(diff.upstreams.get("u-2")?.nodes.map((n) => n.address)).toEqual(["127.2.2.1:80"]);
    expect(diff.upstreams.has("u-7")).toBe(true);
    expect(diff.upstreams.get("u-7")).toBeUndefined();
    expect(diff.upstreams.size).toBe(2);
    expect(diff.addresses).toContain("127.1.2.3:80");
    expect(diff.addresses).toContain("127.2.2.1:80");
  });

  it("names no upstream for a whole snapshot with the same nodes, and every changed one otherwise", () => {
    const applied = new AppliedSnapshot();
    applied.apply(snapshotOf(1, 20, 4));
    const before = served(applied);
    applied.apply(snapshotOf(2, 20, 4));
    const same = diffSnapshots(before, served(applied));
    expect(same.upstreams.size).toBe(0);
    // A whole snapshot may change any pool setting: every address is to be checked.
    expect(same.addresses).toBeUndefined();

    const moved = { ...snapshotOf(3, 20, 4) };
    moved.upstreams = [upstreamAt(0, 3, 2), ...moved.upstreams.slice(1)];
    const middle = served(applied);
    applied.apply(moved);
    expect([...diffSnapshots(middle, served(applied)).upstreams.keys()]).toEqual(["u-0"]);
  });
});
