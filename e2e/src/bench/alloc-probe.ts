import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { GCProfiler, getHeapStatistics } from "node:v8";
import { isMainThread } from "node:worker_threads";
import { allocFigures, type GcEntry } from "./alloc-figures.js";

/**
 * Preloaded into a proxy under measurement (`node --import alloc-probe.js`) by `npm run
 * bench:alloc`. The first SIGUSR2 opens a window on the main thread's heap, the second closes it
 * and writes the window's allocation figures to `$BENCH_ALLOC_PROBE_DIR/<pid>.json`, so the
 * bench counts exactly the bytes the proxy allocated for the requests it sent in between.
 * Worker threads (the data plane's prober) have heaps of their own and are left out.
 */
const dir = process.env.BENCH_ALLOC_PROBE_DIR;
if (isMainThread && dir !== undefined) {
  let open: { profiler: GCProfiler; usedStart: number } | undefined;
  process.on("SIGUSR2", () => {
    if (open === undefined) {
      const profiler = new GCProfiler();
      profiler.start();
      open = { profiler, usedStart: getHeapStatistics().used_heap_size };
      return;
    }
    const usedEnd = getHeapStatistics().used_heap_size;
    const entries = (open.profiler.stop()?.statistics ?? []) as GcEntry[];
    const figures = allocFigures(open.usedStart, usedEnd, entries);
    open = undefined;
    // Written aside and renamed: the bench reads the file as soon as its name appears, and
    // under load it once read it half-written ("Unexpected end of JSON input").
    const file = join(dir, `${process.pid}.json`);
    writeFileSync(`${file}.tmp`, JSON.stringify(figures));
    renameSync(`${file}.tmp`, file);
  });
}
