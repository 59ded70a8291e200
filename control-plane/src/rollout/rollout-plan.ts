/**
 * What a new rollout is made of before anything is written: the base (the version published
 * now), the canaries chosen among the SYNCED data planes, the rest's counts on the base so far
 * (their baseline), and the check that its rollback could undo everything after the base.
 *
 * Why apart from the controller: every refusal here happens before the rest are pinned or the
 * apply runs, so a rollout that could not be judged or rolled back is never started.
 */
import type { FleetSource } from "../fleet/data-plane-view.js";
import type { SnapshotPublisher } from "../grpc/snapshot-publisher.js";
import type { ConfigHistory } from "../history/config-history.js";
import { clawgateError, type Outcome } from "../resources/errors.js";
import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";
import type { OutcomeBoard } from "./outcome-board.js";
import {
  canaryCandidates,
  chooseCanaries,
  type RolloutSpec,
  type StoredRollout,
} from "./rollout-state.js";
import type { Counts } from "./rollout-verdict.js";

export interface RolloutPlanSources {
  builder: Pick<SnapshotPublisher, "current">;
  fleet: FleetSource;
  board: OutcomeBoard;
  history: Pick<ConfigHistory, "undoable">;
}

/** The baking rollout to store with the apply, and the snapshot of its base. */
export async function planRollout(
  sources: RolloutPlanSources,
  spec: RolloutSpec,
  author: string,
  clock: () => number,
): Promise<Outcome<{ rollout: StoredRollout; base: PublishedSnapshot }>> {
  const base = sources.builder.current();
  if (base === undefined) return refused("no version is published yet to roll out from");
  // Data planes streaming from any replica, not only this one: a canary on another replica
  // gets the version from there (every replica follows the stored rollout's canaries).
  const candidates = canaryCandidates(sources.fleet.list());
  if (candidates.length === 0) {
    return refused("no connected data plane serves the published version (SYNCED) to be a canary");
  }
  const canaries = chooseCanaries(candidates, spec.canary);
  const { board } = sources;
  const baseline: Record<string, Counts> = {};
  for (const node of board.nodes()) {
    if (!canaries.includes(node)) baseline[node] = board.of(node, base.version);
  }
  // Its rollback undoes every entry newer than the base: refuse now what could not be undone.
  const undoable = await sources.history.undoable(base.version);
  if (!undoable.ok) {
    return refused(
      `a rollout from version ${base.version} could not be rolled back: ${undoable.error.message}`,
    );
  }
  const now = clock();
  const rollout: StoredRollout = {
    state: "baking",
    baseVersion: base.version,
    canaries,
    spec,
    author,
    startedAt: new Date(now).toISOString(),
    bakeUntil: new Date(now + spec.bakeSeconds * 1000).toISOString(),
    baseline,
  };
  return { ok: true, rollout, base };
}

function refused(message: string) {
  return { ok: false as const, error: clawgateError("CLAWGATE_ROLLOUT_REFUSED", message) };
}
