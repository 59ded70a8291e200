/**
 * Turns a v8.GCProfiler recording into allocation figures. V8 keeps no running total of bytes
 * allocated, but every byte allocated is either still in the heap at the end or was freed by
 * one of the collections the profiler saw, so: allocated = (used at end - used at start) + the
 * sum of what each collection freed. Bytes a scavenge moves into old space are what outlived
 * a young generation: per-request objects kept alive by timers, listeners or closures. A
 * scavenge's cost is the main thread's pause for it: at 50 connections every request in flight
 * waits it out, so the longest ones are what a p99 is made of.
 */

/** The parts of one GCProfiler statistics entry this file reads. */
export interface GcEntry {
  gcType: string;
  /** The collection's duration in microseconds, as GCProfiler reports it. */
  cost: number;
  beforeGC: GcHeap;
  afterGC: GcHeap;
}

interface GcHeap {
  heapStatistics: { usedHeapSize: number };
  heapSpaceStatistics: { spaceName: string; spaceUsedSize: number }[];
}

export interface AllocFigures {
  /** Bytes allocated on the JS heap over the window. */
  allocatedBytes: number;
  /** Bytes that old space grew by across scavenges (promoted young objects). */
  promotedBytes: number;
  scavenges: number;
  /** Microseconds the scavenges took in all, and the longest one. */
  scavengeMicros: number;
  longestScavengeMicros: number;
  /** Mark-sweep-compact and incremental marking collections. */
  fullGcs: number;
}

export function allocFigures(usedStart: number, usedEnd: number, entries: GcEntry[]): AllocFigures {
  let freed = 0;
  let promoted = 0;
  let scavenges = 0;
  let scavengeMicros = 0;
  let longestScavengeMicros = 0;
  let fullGcs = 0;
  for (const entry of entries) {
    freed += entry.beforeGC.heapStatistics.usedHeapSize - entry.afterGC.heapStatistics.usedHeapSize;
    if (entry.gcType === "Scavenge") {
      scavenges++;
      scavengeMicros += entry.cost;
      longestScavengeMicros = Math.max(longestScavengeMicros, entry.cost);
      promoted += oldSpaceUsed(entry.afterGC) - oldSpaceUsed(entry.beforeGC);
    } else if (entry.gcType !== "ProcessWeakCallbacks") {
      fullGcs++;
    }
  }
  return {
    allocatedBytes: usedEnd - usedStart + freed,
    promotedBytes: promoted,
    scavenges,
    scavengeMicros,
    longestScavengeMicros,
    fullGcs,
  };
}

function oldSpaceUsed(heap: GcHeap): number {
  const old = heap.heapSpaceStatistics.find((space) => space.spaceName === "old_space");
  if (old === undefined)
    throw new Error("GCProfiler entry without an old_space in heapSpaceStatistics");
  return old.spaceUsedSize;
}
