import { renameSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import { join } from "node:path";
import { isMainThread } from "node:worker_threads";

/**
 * Preloaded into a proxy under measurement (`node --import cpu-profile-probe.js`) by `npm run
 * bench:ab` with BENCH_PROFILE_DIR set. The first SIGUSR2 starts a CPU profile of the main
 * thread (100 us sampling), the second stops it and writes `$BENCH_PROFILE_DIR/<pid>.cpuprofile`,
 * so the profile covers exactly one measured wrk run and can be read per request, next to the
 * other proxy's of the same round. (`--cpu-prof` covers the whole life, start-up included, and
 * is lost when a proxy that does not handle SIGTERM is stopped.)
 */
const dir = process.env.BENCH_PROFILE_DIR;
// `heap`: a sampling heap profile instead (every 256 B, collected objects kept), for where the
// bytes of a request are allocated; written as `<pid>.heapprofile`.
const heap = process.env.BENCH_PROFILE_KIND === "heap";
if (isMainThread && dir !== undefined) {
  // Written aside and renamed: the bench waits for the name, then reads the file.
  const save = (name: string, profile: unknown) => {
    writeFileSync(join(dir, `${name}.tmp`), JSON.stringify(profile));
    renameSync(join(dir, `${name}.tmp`), join(dir, name));
  };
  let session: Session | undefined;
  process.on("SIGUSR2", () => {
    if (session === undefined) {
      session = new Session();
      session.connect();
      if (heap) {
        session.post("HeapProfiler.startSampling", {
          samplingInterval: 256,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        });
        return;
      }
      session.post("Profiler.enable");
      session.post("Profiler.setSamplingInterval", { interval: 100 });
      session.post("Profiler.start");
      return;
    }
    const open = session;
    session = undefined;
    if (heap) {
      open.post("HeapProfiler.stopSampling", (error, result) => {
        if (error === null) save(`${process.pid}.heapprofile`, result.profile);
        open.disconnect();
      });
      return;
    }
    open.post("Profiler.stop", (error, result) => {
      if (error === null) save(`${process.pid}.cpuprofile`, result.profile);
      open.disconnect();
    });
  });
}
