import type { Logger } from "pino";
import type { ForgetsRemoved } from "../metrics/removed-names.js";
import type { VersionOutcomes } from "../outcomes/version-outcomes.js";
import type { RequestHealing } from "../proxy/request-healing.js";
import type { PoolRegistry } from "../upstream/pool-registry.js";
import { type AfterSwapStep, runAfterSwap } from "./after-swap.js";
import type { CompiledSnapshot } from "./applied-snapshot.js";
import { diffSnapshots, type SnapshotDiff } from "./snapshot-diff.js";

/** The request path's state kept across snapshots, in a process that answers requests. */
export interface RequestPathState {
  readonly pools: Pick<PoolRegistry, "retain">;
  readonly healing: Pick<RequestHealing, "syncChanged" | "syncInTurns">;
  readonly outcomes: Pick<VersionOutcomes, "serving">;
  /** The request-path metrics labelled by route, upstream or tenant. */
  readonly metrics: readonly ForgetsRemoved[];
}

/**
 * Brings the request path in line with `next`, swapped in over `previous` (undefined: the
 * first), then runs the caller's own steps, given what the swap changed: the data plane's
 * primary and each of its workers follow a swap this one way. The work is in proportion to what
 * the swap changed (diffSnapshots), so a one-route delta at 10,000 routes and 20,000 nodes
 * does not walk every upstream and pool in every process. Each step runs on its own
 * (runAfterSwap): the new version is served already, so a failure is logged, never NACKed.
 */
export function followSwap(
  previous: CompiledSnapshot | undefined,
  next: CompiledSnapshot,
  requestPath: RequestPathState,
  logger: Pick<Logger, "error">,
  own: (diff: SnapshotDiff) => readonly AfterSwapStep[] = () => [],
): void {
  const { pools, healing, outcomes, metrics } = requestPath;
  const diff = diffSnapshots(previous, next);
  runAfterSwap(
    [
      ["outcomes", () => outcomes.serving(next.version)],
      // Pools of removed nodes, and those built with settings no route uses any more (a
      // changed keepAliveTimeoutMs), close once their requests in flight are done.
      ["pools", () => pools.retain({ get: (a) => next.poolKeysOf(a) }, diff.addresses)],
      // A delta on the snapshot synced last: only the upstreams it changed. Otherwise in turns:
      // a first snapshot's 2,000 breakers and pickers; a request that meets an upstream not
      // reached yet makes its record then (RequestHealing.upstream).
      [
        "healing",
        () =>
          (diff.changed !== undefined &&
            previous !== undefined &&
            healing.syncChanged(previous, next, diff.changed)) ||
          void healing
            .syncInTurns(next)
            .catch((err: unknown) =>
              logger.error(
                { err, step: "healing", version: next.version },
                "snapshot applied, but a step after the swap failed",
              ),
            ),
      ],
      // Series of removed routes, upstreams and tenants go (breakers' go with them in healing):
      // a /metrics that listed every name ever configured would grow with each rename.
      [
        "removed names' series",
        () => {
          for (const removing of metrics) removing.forgetRemoved(diff.removed);
        },
      ],
      ...own(diff),
    ],
    next.version,
    logger,
  );
}
