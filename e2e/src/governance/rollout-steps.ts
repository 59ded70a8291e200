import type { ApplyResource, ControlPlane, DataPlane } from "../support/index.js";
import { waitFor } from "../support/index.js";

/** GET /v1/rollout, the fields the rollout tests read. */
export interface Rollout {
  state: "baking" | "promoted" | "rolled-back";
  version: number;
  baseVersion: number;
  canaries: string[];
  reason?: string;
  rollbackVersion?: number;
  outcomes: { canary: { requests: number; failures: number } };
  verdict?: { kind: "failing" | "passing" | "inconclusive"; reason?: string };
}

/**
 * Applies `resources` as a rollout to one canary (judged after 10 requests, 5 % over the rest
 * of the fleet), waits until `canary` serves the new version, and resolves with it.
 */
export async function startRollout(
  cp: ControlPlane,
  canary: DataPlane,
  resources: ApplyResource[],
  bakeSeconds: number,
): Promise<number> {
  const response = await cp.admin.call<{ revision: number }>("POST", "/v1/apply", {
    resources,
    rollout: { canary: 1, bakeSeconds, maxErrorRatio: 0.05, minRequests: 10 },
  });
  const version = response.body.revision;
  // Published at the revision the snapshot was built at, which other writes (the data planes'
  // shared records) may have moved past the apply's own.
  await waitFor(async () => ((await canary.snapshotVersion()) ?? 0) >= version, {
    what: `canary ${canary.nodeId} to apply version ${version}`,
    timeoutMs: 20_000,
  });
  return version;
}

/** Waits until the rollout is in `state` and resolves with it. */
export async function rolloutIn(cp: ControlPlane, state: Rollout["state"]): Promise<Rollout> {
  return waitFor(
    async () => {
      const rollout = (await cp.admin.call<Rollout>("GET", "/v1/rollout")).body;
      return rollout.state === state ? rollout : undefined;
    },
    { what: `the rollout to be ${state}`, timeoutMs: 30_000 },
  );
}

/** Waits until the rollout is no longer baking (promoted or rolled back) and resolves with it. */
export async function rolloutEnded(cp: ControlPlane): Promise<Rollout> {
  return waitFor(
    async () => {
      const rollout = (await cp.admin.call<Rollout>("GET", "/v1/rollout")).body;
      return rollout.state !== "baking" ? rollout : undefined;
    },
    { what: "the rollout to end", timeoutMs: 30_000 },
  );
}
