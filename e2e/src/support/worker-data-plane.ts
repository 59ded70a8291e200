import type { ControlPlane } from "./control-plane-process.js";
import { waitForConvergence } from "./convergence.js";
import { type DataPlane, startDataPlane } from "./data-plane-process.js";
import { waitForWorkers } from "./proxy-workers.js";
import type { Teardown } from "./teardown.js";

export interface WorkerDataPlaneOptions {
  /** Environment on top of the control plane's address and CLAWGATE_WORKERS: "2". */
  env?: Record<string, string>;
  /** The version it must apply before it counts as started; default the last config write's. */
  atLeast?: number;
}

/**
 * Starts a data plane with two proxy workers streaming from `cp`, stopped by `teardown`, and
 * resolves once it applied the config (SYNCED) and both workers listen. Forking and loading
 * two workers is slow on a busy 2-core machine: every wait here allows 60 s.
 */
export async function startWorkerDataPlane(
  teardown: Teardown,
  cp: ControlPlane,
  options: WorkerDataPlaneOptions = {},
): Promise<DataPlane> {
  const dp = await startDataPlane(
    { CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_WORKERS: "2", ...options.env },
    { readyTimeoutMs: 60_000 },
  );
  teardown.add(dp.nodeId, () => dp.stop());
  await waitForConvergence(cp, [dp], { atLeast: options.atLeast, timeoutMs: 60_000 });
  await waitForWorkers(dp, 2);
  return dp;
}
