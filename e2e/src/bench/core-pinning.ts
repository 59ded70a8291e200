import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { processTree } from "./process-usage.js";

/**
 * Where the bench's processes run. Unpinned, the proxy under measurement, wrk and the nginx
 * upstream share the cores as the scheduler likes, so a proxy's requests/s also depends on how
 * it placed them, which differs from one proxy and run to the next. Pinned, as issue 10's table
 * was measured, the load (wrk, the upstream, the control plane and this process) has one core
 * and the proxy under measurement the other, so a proxy's requests/s is what its own core gives
 * and a requests/s ratio follows the CPU-per-request ratio.
 */
export interface CorePinning {
  /** The CPU (taskset list) of the load side, or undefined when nothing is pinned. */
  load: string | undefined;
  /** The CPU (taskset list) of the proxy under measurement, or undefined. */
  proxy: string | undefined;
  /** One line for the bench's header. */
  describe: string;
}

/**
 * BENCH_PIN as a pinning: `auto` (the default) pins when this process may use at least two
 * CPUs and the data plane runs one worker (more workers need more than one core each side);
 * `off` pins nothing; `on` pins or throws saying why it cannot.
 */
export function corePinning(setting: string | undefined, workers: number): CorePinning {
  const mode = setting === undefined || setting.trim() === "" ? "auto" : setting.trim();
  if (mode !== "auto" && mode !== "on" && mode !== "off") {
    throw new Error(`BENCH_PIN must be auto, on or off, got ${setting}`);
  }
  const unpinned = (why: string): CorePinning => ({
    load: undefined,
    proxy: undefined,
    describe: `unpinned (${why})`,
  });
  if (mode === "off") return unpinned("BENCH_PIN=off");
  const allowed = allowedCpus(readFileSync("/proc/self/status", "utf8"));
  const reason =
    allowed.length < 2
      ? `${allowed.length} CPU allowed`
      : workers > 1
        ? `${workers} data-plane workers`
        : undefined;
  if (reason !== undefined) {
    if (mode === "on") throw new Error(`BENCH_PIN=on cannot pin: ${reason}`);
    return unpinned(reason);
  }
  const [load, proxy] = [String(allowed[0]), String(allowed[1])];
  return {
    load,
    proxy,
    describe: `load (wrk, upstream, control plane) on CPU ${load}, proxy under measurement on CPU ${proxy}`,
  };
}

/** The CPUs in a /proc/<pid>/status's Cpus_allowed_list, e.g. "0-1,4" -> [0, 1, 4]. */
export function allowedCpus(status: string): number[] {
  const list = /^Cpus_allowed_list:\s*(\S+)$/m.exec(status)?.[1];
  if (list === undefined) throw new Error("no Cpus_allowed_list in /proc/self/status");
  const cpus: number[] = [];
  for (const part of list.split(",")) {
    const [from, to = from] = part.split("-").map(Number) as [number, number?];
    for (let cpu = from; cpu <= to; cpu++) cpus.push(cpu);
  }
  return cpus;
}

/**
 * Pins `pid` and its descendants, every thread of each (`taskset -a`), to `cpus`. Threads and
 * children made later inherit the mask of the thread that makes them.
 */
export function pinTree(pid: number, cpus: string | undefined): void {
  if (cpus === undefined) return;
  for (const member of processTree(pid)) {
    execFileSync("taskset", ["-a", "-p", "-c", cpus, String(member)], { stdio: "ignore" });
  }
}
