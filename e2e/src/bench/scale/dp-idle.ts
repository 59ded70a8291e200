import { startDataPlane } from "../../support/data-plane-process.js";
import { metricValue } from "../../support/metrics-text.js";
import { cpuSeconds } from "../process-usage.js";
import { threadTicks } from "../thread-cpu.js";
import type { ScaleSize } from "./scale-config.js";
import { scaleSnapshot, startStubControlPlane } from "./stub-control-plane.js";

/**
 * `node e2e/dist/bench/scale/dp-idle.js`: what one data-plane process costs with no traffic
 * and no config change, holding issue 9's 20,000 nodes that all refuse connections. A real
 * clawgate-data-plane process is fed by a stub control plane; once it ACKed the full snapshot
 * and a settle time passed, its CPU time (every thread, from /proc) is read over a window and
 * printed with each busy thread's share. Probes are due once an hour per node, so the idle
 * cost should be near nothing.
 * Environment: CLAWGATE_BENCH_ROUTES, _UPSTREAMS, _NODES (issue 9's sizes by default),
 * _UNHEALTHY_THRESHOLD (2, the default a control plane fills), _SETTLE_MS (5000),
 * _WINDOW_MS (30000), _CPU_PROF_DIR (unset; a directory: the data plane runs with
 * --cpu-prof and writes a profile per thread there when it stops).
 */
const size: ScaleSize = {
  routes: setting("ROUTES", 10_000),
  upstreams: setting("UPSTREAMS", 2_000),
  nodes: setting("NODES", 20_000),
};
const unhealthyThreshold = setting("UNHEALTHY_THRESHOLD", 2);
const settleMs = setting("SETTLE_MS", 5_000);
const windowMs = setting("WINDOW_MS", 30_000);
const profileDir = process.env.CLAWGATE_BENCH_CPU_PROF_DIR;
const LAG = "nodejs_eventloop_lag_max_seconds";

function setting(name: string, fallback: number): number {
  const raw = process.env[`CLAWGATE_BENCH_${name}`];
  return raw === undefined ? fallback : Number(raw);
}

async function main(): Promise<void> {
  const full = scaleSnapshot(size, unhealthyThreshold);
  const cp = await startStubControlPlane(full);
  const dp = await startDataPlane(
    { CLAWGATE_CP_ADDRESSES: cp.address, CLAWGATE_LOG_LEVEL: "warn" },
    {
      waitUntil: "none",
      nodeArgs: profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${profileDir}`],
    },
  );
  try {
    await cp.answered(full.version);
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    // Resets the lag histogram, so the read after the window gives the window's longest block.
    // The lag family alone: a whole scrape's own block would land in the window it measures.
    const lag = async () =>
      metricValue(await (await fetch(`${dp.adminUrl}/metrics?name=${LAG}`)).text(), LAG);
    await lag();
    const pid = dp.process.pid;
    const threadsBefore = threadTicks(pid);
    const before = cpuSeconds([pid]);
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const cpuMs = (cpuSeconds([pid]) - before) * 1000;
    const threads: Record<string, number> = {};
    for (const [thread, ticks] of threadTicks(pid)) {
      const ms = (ticks - (threadsBefore.get(thread) ?? 0)) * 10;
      if (ms > 0) threads[thread] = ms;
    }
    const lagMax = await lag();
    console.log(
      JSON.stringify({
        size,
        unhealthyThreshold,
        windowMs,
        cpuMs: Math.round(cpuMs),
        cpuPercent: Number(((100 * cpuMs) / windowMs).toFixed(1)),
        threadCpuMs: threads,
        eventLoopBlockMaxMs: lagMax === undefined ? undefined : Math.round(lagMax * 1000),
      }),
    );
  } finally {
    await dp.stop();
    cp.close();
  }
}

await main();
