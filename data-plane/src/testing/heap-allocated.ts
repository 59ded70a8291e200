import { GCProfiler, getHeapStatistics } from "node:v8";

/**
 * Bytes `work` allocates on this thread's JS heap, run synchronously. V8 keeps no running
 * total, but every byte allocated is still in the heap at the end or was freed by a collection
 * the profiler saw: heap growth plus what each collection freed. Unlike time, this does not
 * move with machine load, so a test can bound it.
 */
export function heapAllocated(work: () => void): number {
  const profiler = new GCProfiler();
  profiler.start();
  const usedStart = getHeapStatistics().used_heap_size;
  work();
  const usedEnd = getHeapStatistics().used_heap_size;
  let freed = 0;
  for (const gc of profiler.stop()?.statistics ?? []) {
    freed += gc.beforeGC.heapStatistics.usedHeapSize - gc.afterGC.heapStatistics.usedHeapSize;
  }
  return usedEnd - usedStart + freed;
}
