import { startDataPlane } from "../../support/data-plane-process.js";
import { Teardown } from "../../support/teardown.js";
import { type ThreadCpu, threadCpu } from "../thread-cpu.js";
import type { ScaleSize } from "./scale-config.js";
import { readLagMs, startBlockMs } from "./start-block.js";
import { scaleSnapshot, startStubControlPlane } from "./stub-control-plane.js";

/**
 * `node e2e/dist/bench/scale/dp-boot.js`: several real clawgate-data-plane processes started at
 * once, each taking issue 9's whole config as its first snapshot from one stub control plane
 * (bytes encoded once, before any data plane starts), so what they contend for is each other:
 * the boot of `bench:scale` without etcd and a real control plane. Once every one ACKed, it
 * prints each one's longest event-loop block since its start (`nodejs_eventloop_lag_max_seconds`)
 * the time to its ACK and its CPU seconds by thread until then (all, main, busiest other: the
 * probe worker).
 * Environment: CLAWGATE_BENCH_ROUTES, _UPSTREAMS, _NODES (10,000 / 2,000 / 20,000),
 * _DATAPLANES (4), _NODE_ARGS (node options for the data planes, space separated, such as
 * `--trace-gc` or `--cpu-prof --cpu-prof-dir=/tmp/prof`), _ECHO (1: their output to stderr),
 * _AFTER_MS (0; how long they run on once all applied: their longest block and CPU by thread
 * in that window, the seconds after boot),
 * _DP_BIN (another build's clawgate-data-plane.js, to compare builds; default this one's).
 */
const size: ScaleSize = {
  routes: setting("ROUTES", 10_000),
  upstreams: setting("UPSTREAMS", 2_000),
  nodes: setting("NODES", 20_000),
};
const dataPlaneCount = setting("DATAPLANES", 4);
const nodeArgs = (process.env.CLAWGATE_BENCH_NODE_ARGS ?? "").split(" ").filter((a) => a !== "");
const echo = process.env.CLAWGATE_BENCH_ECHO === "1";
const bin = process.env.CLAWGATE_BENCH_DP_BIN || undefined;
const ACK_TIMEOUT_MS = 600_000;
/** How long they are watched once all applied; default 0 (stopped at once). */
const afterMs = setting("AFTER_MS", 0);

function setting(name: string, fallback: number): number {
  const raw = process.env[`CLAWGATE_BENCH_${name}`];
  return raw === undefined ? fallback : Number(raw);
}

async function main(): Promise<void> {
  const teardown = new Teardown();
  const full = scaleSnapshot(size, 2);
  const cp = await startStubControlPlane(full);
  teardown.add("stub control plane", async () => cp.close());
  try {
    const started = performance.now();
    const startBlocks: number[] = [];
    /** Each one's CPU seconds by thread from its start to its first snapshot applied. */
    const cpu: ThreadCpu[] = [];
    const dataPlanes = await Promise.all(
      Array.from({ length: dataPlaneCount }, async (_, i) => {
        const dp = await startDataPlane(
          { CLAWGATE_CP_ADDRESSES: cp.address, CLAWGATE_LOG_LEVEL: "info" },
          {
            waitUntil: "none",
            nodeArgs,
            echo,
            name: `dp-${i}`,
            ...(bin === undefined ? {} : { bin }),
          },
        );
        teardown.add(`data plane ${i}`, () => dp.stop());
        return dp;
      }),
    );
    const ackMs = await Promise.all(
      dataPlanes.map(async (dp, i) => {
        startBlocks[i] = await startBlockMs(dp, ACK_TIMEOUT_MS);
        const deadline = performance.now() + ACK_TIMEOUT_MS;
        // Polls /readyz (200 once a snapshot is applied): the stub counts ACKs, not whose they
        // are, and a whole /metrics scrape would add its own block to the one measured.
        while ((await dp.readyStatus()) !== 200) {
          if (performance.now() > deadline) throw new Error(`${dp.nodeId} never applied`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        cpu[i] = threadCpu(dp.process.pid);
        return Math.round(performance.now() - started);
      }),
    );
    const blocks = await Promise.all(dataPlanes.map((dp) => readLagMs(dp)));
    // The seconds after boot: what the full snapshot sets off once applied (health targets,
    // the first health report, the cache write, garbage collection), with no change and no scrape.
    await new Promise((resolve) => setTimeout(resolve, afterMs));
    const afterBlocks = await Promise.all(dataPlanes.map((dp) => readLagMs(dp)));
    const cpuAfter = dataPlanes.map((dp) => threadCpu(dp.process.pid));
    console.log(
      JSON.stringify({
        size,
        dataPlanes: dataPlaneCount,
        bootBlockMaxMs: Math.max(...blocks),
        bootBlockMs: blocks,
        startBlockMaxMs: Math.max(...startBlocks),
        startBlockMs: startBlocks,
        appliedAfterMs: ackMs,
        cpuSecondsAtApplied: cpu,
        afterMs,
        afterBlockMs: afterBlocks,
        cpuSecondsAfter: cpuAfter,
      }),
    );
  } finally {
    await teardown.run();
  }
}

await main();
