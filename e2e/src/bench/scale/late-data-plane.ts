import type { DataPlane } from "../../support/data-plane-process.js";
import { startDataPlane } from "../../support/data-plane-process.js";
import { threadCpu } from "../thread-cpu.js";
import { AppliedVersions } from "./applied-versions.js";
import { readLagMs, startBlockMs } from "./start-block.js";

export interface LateDataPlaneOptions {
  /** The control plane's gRPC address. */
  cpAddress: string;
  /** The version the fleet serves: the late one's first snapshot. */
  version: number;
  /** Node options (a CPU profile) and another build's binary, as for the fleet. */
  nodeArgs: string[];
  bin?: string | undefined;
  /** Longest wait for its start and its first snapshot. */
  timeoutMs: number;
  /** How long it is watched after applying, for the block of the seconds after boot. */
  afterMs: number;
}

export interface LateDataPlaneFigures {
  /** Longest block before it listened (the process's start). */
  startBlockMs: number;
  /** Longest block from listening until the full snapshot is applied. */
  bootBlockMs: number;
  /** Longest block in the `afterMs` after that, with no change and no scrape. */
  afterBlockMs: number;
  /** From spawning it to its "snapshot applied" log line. */
  appliedAfterMs: number;
  /** CPU seconds from its start to the full snapshot applied, and to the end of `afterMs`. */
  cpuAtApplied: ReturnType<typeof threadCpu>;
  cpuAfter: ReturnType<typeof threadCpu>;
}

/**
 * One more data plane started while the fleet already serves and the control plane is settled:
 * a restart or a scale-up, the case the boot target is about (ten booting at once on two cores
 * measure mostly each other). It is stopped once measured, so the rows after it do not see it.
 */
export async function measureLateDataPlane(
  options: LateDataPlaneOptions,
): Promise<LateDataPlaneFigures> {
  const startedAt = Date.now();
  const dp: DataPlane = await startDataPlane(
    { CLAWGATE_CP_ADDRESSES: options.cpAddress, CLAWGATE_LOG_LEVEL: "info" },
    {
      waitUntil: "none",
      name: "late-dp",
      nodeArgs: options.nodeArgs,
      ...(options.bin === undefined ? {} : { bin: options.bin }),
    },
  );
  try {
    const applied = new AppliedVersions([dp]);
    const startBlock = await startBlockMs(dp, options.timeoutMs);
    const [appliedAt] = await applied.waitAll(options.version, options.timeoutMs);
    const cpuAtApplied = threadCpu(dp.process.pid);
    const bootBlock = await readLagMs(dp);
    await new Promise((resolve) => setTimeout(resolve, options.afterMs));
    const cpuAfter = threadCpu(dp.process.pid);
    const afterBlock = await readLagMs(dp);
    return {
      startBlockMs: startBlock,
      bootBlockMs: bootBlock,
      afterBlockMs: afterBlock,
      appliedAfterMs: appliedAt! - startedAt,
      cpuAtApplied,
      cpuAfter,
    };
  } finally {
    await dp.stop();
  }
}
