import type { ControlPlane } from "./control-plane-process.js";
import type { DataPlane } from "./data-plane-process.js";
import { waitFor } from "./wait-for.js";

export interface ConvergenceOptions {
  /**
   * Wait at least until this version is published (e.g. the revision of a write); default the
   * newest revision a config write through `cp.admin` produced.
   */
  atLeast?: number;
  /** Deadline; default 20 s. */
  timeoutMs?: number;
}

/**
 * Waits until the control plane has published a version (at least `atLeast`, by default the
 * revision of the last config write through `cp.admin`), every data plane
 * reports it as clawgate_snapshot_version, and the CP lists every one of them as SYNCED at that
 * version. Resolves with the version.
 */
export async function waitForConvergence(
  cp: ControlPlane,
  dataPlanes: DataPlane[],
  options: ConvergenceOptions = {},
): Promise<number> {
  const atLeast = options.atLeast ?? cp.admin.lastConfigRevision;
  let seen = "";
  return waitFor(
    async () => {
      cp.process.assertRunning();
      for (const dp of dataPlanes) dp.process.assertRunning();
      const snapshot = await cp.admin.snapshot();
      const dpVersions = await Promise.all(dataPlanes.map((dp) => dp.snapshotVersion()));
      const fleet = await cp.admin.dataplanes();
      seen = `CP snapshot ${JSON.stringify(snapshot)}; DP versions ${JSON.stringify(
        dataPlanes.map((dp, i) => [dp.nodeId, dpVersions[i]]),
      )}; fleet ${JSON.stringify(fleet.map((d) => [d.nodeId, d.state, d.appliedVersion]))}`;
      if (!snapshot.published || snapshot.version < atLeast) return false;
      const version = snapshot.version;
      const allApplied = dpVersions.every((v) => v === version);
      const allSynced = dataPlanes.every((dp) =>
        fleet.some(
          (item) =>
            item.nodeId === dp.nodeId && item.state === "SYNCED" && item.appliedVersion === version,
        ),
      );
      return allApplied && allSynced ? version : false;
    },
    {
      get what() {
        return `data planes ${dataPlanes.map((dp) => dp.nodeId).join(", ")} to apply the published snapshot${atLeast > 0 ? ` (>= ${atLeast})` : ""} and show SYNCED [${seen}]`;
      },
      timeoutMs: options.timeoutMs ?? 20_000,
    },
  );
}
