import type { SnapshotApplyResult } from "../snapshot-client/snapshot-client.js";

/** The primary's count of refusals (clawgate_snapshot_nacks_total and what it has counted). */
export interface NackCount {
  /** Refusals counted so far. */
  count(): number;
  /** Counts one more. */
  nacked(): void;
}

/**
 * The outcome of an apply made in every worker and then in the primary (TwoPhaseApply): a
 * worker's refusal is counted like the primary's own, once (the primary counts its own as it
 * refuses). Undefined stays undefined: superseded by a newer snapshot, or the data plane is
 * stopping; nothing was refused, so nothing is counted or NACKed, as without workers.
 */
export async function everyWorkerOutcome(
  apply: Promise<SnapshotApplyResult>,
  nacks: NackCount,
): Promise<SnapshotApplyResult> {
  const before = nacks.count();
  const result = await apply;
  if (result?.ok === false && nacks.count() === before) nacks.nacked();
  return result;
}
