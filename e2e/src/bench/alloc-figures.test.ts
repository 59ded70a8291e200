import { describe, expect, it } from "vitest";
import { allocFigures, type GcEntry } from "./alloc-figures.js";

function gc(gcType: string, used: [number, number], old: [number, number], cost = 0): GcEntry {
  const heap = (usedHeapSize: number, oldUsed: number) => ({
    heapStatistics: { usedHeapSize },
    heapSpaceStatistics: [
      { spaceName: "new_space", spaceUsedSize: usedHeapSize - oldUsed },
      { spaceName: "old_space", spaceUsedSize: oldUsed },
    ],
  });
  return { gcType, cost, beforeGC: heap(used[0], old[0]), afterGC: heap(used[1], old[1]) };
}

describe("allocFigures", () => {
  it("counts heap growth plus what each collection freed, and promotion across scavenges", () => {
    // 1,000 used at start; a scavenge frees 3,000 of 4,000 and promotes 200 into old space;
    // a mark-sweep frees 500 (old space shrinking is not promotion); 2,500 used at the end.
    const figures = allocFigures(1_000, 2_500, [
      gc("Scavenge", [4_000, 1_000], [600, 800]),
      gc("MarkSweepCompact", [1_500, 1_000], [800, 300]),
    ]);
    expect(figures).toEqual({
      allocatedBytes: 2_500 - 1_000 + 3_000 + 500,
      promotedBytes: 200,
      scavenges: 1,
      scavengeMicros: 0,
      longestScavengeMicros: 0,
      fullGcs: 1,
    });
  });

  it("is heap growth alone when no collection ran", () => {
    expect(allocFigures(1_000, 1_800, [])).toEqual({
      allocatedBytes: 800,
      promotedBytes: 0,
      scavenges: 0,
      scavengeMicros: 0,
      longestScavengeMicros: 0,
      fullGcs: 0,
    });
  });

  it("adds up the scavenges' pauses and keeps the longest, leaving full collections out", () => {
    const figures = allocFigures(0, 0, [
      gc("Scavenge", [4_000, 1_000], [0, 0], 700),
      gc("MarkSweepCompact", [1_000, 500], [0, 0], 9_000),
      gc("Scavenge", [4_000, 1_000], [0, 0], 1_300),
    ]);
    expect(figures.scavengeMicros).toBe(2_000);
    expect(figures.longestScavengeMicros).toBe(1_300);
  });

  it("names what is missing from a malformed entry", () => {
    const entry = gc("Scavenge", [2, 1], [0, 0]);
    entry.afterGC.heapSpaceStatistics = [];
    expect(() => allocFigures(0, 0, [entry])).toThrow(/old_space/);
  });
});
