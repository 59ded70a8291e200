import { type ClawgateError, clawgateError, type Outcome } from "../resources/errors.js";
import type { Compare, KeyValue } from "../store/store.js";
import { rolloutKey, type StoredRollout, storedRolloutSchema } from "./rollout-state.js";

/**
 * What a config write requires of the progressive rollout, judged on the rollout key as the
 * write's model shows it and pinned by `compare` in the write's own commit. Checked on every
 * attempt of every replica: a check of one replica's memory before the write let a write that
 * raced a rollout's start (or retried after losing to it, or ran on a replica that had not seen
 * it yet) commit while the rollout baked, and be undone by its rollback.
 *
 * - `ends` undefined: an ordinary write, or a rollout's start: refused while a rollout bakes.
 * - `ends` a mod revision: the write ends the rollout stored at that revision (its rollback):
 *   refused if the rollout changed since that decision (promoted or aborted by another replica).
 */
export function rolloutFence(
  prefix: string,
  stored: KeyValue | undefined,
  ends: number | undefined,
): Outcome<{ compare: Compare }> {
  const key = rolloutKey(prefix);
  const compare = { key, modRevision: stored?.modRevision ?? 0 };
  const rollout = parseStored(stored);
  if (ends !== undefined) {
    if (compare.modRevision === ends) return { ok: true, compare };
    return { ok: false, error: rolloutChanged(rollout) };
  }
  if (rollout?.state === "baking") return { ok: false, error: rolloutInProgress(rollout) };
  return { ok: true, compare };
}

/** The 409 every config write gets while a rollout bakes, naming it and the way out. */
export function rolloutInProgress(rollout: StoredRollout): ClawgateError {
  return clawgateError(
    "CLAWGATE_ROLLOUT_IN_PROGRESS",
    `a rollout of version ${rollout.version ?? "?"} to canaries ${rollout.canaries.join(", ")} is baking until ${rollout.bakeUntil}; promote or abort it first (POST /v1/rollout/promote or /v1/rollout/abort)`,
    { version: rollout.version, baseVersion: rollout.baseVersion },
  );
}

/** A promote or abort whose rollout another replica (or the leader's check) ended first. */
export function rolloutChanged(now: StoredRollout | undefined): ClawgateError {
  const state =
    now === undefined
      ? "is gone"
      : now.state === "baking"
        ? "was replaced"
        : `was ${now.state} meanwhile${now.reason === undefined ? "" : ` (${now.reason})`}`;
  return clawgateError(
    "CLAWGATE_STORE_CONFLICT",
    `the rollout of version ${now?.version ?? "?"} ${state}; nothing was changed (GET /v1/rollout)`,
  );
}

/**
 * The stored rollout, its version filled in: a baking one is written in its apply's commit, so
 * until an ending rewrites it with its version, its mod revision is that version.
 */
export function parseStored(kv: KeyValue | undefined): StoredRollout | undefined {
  if (kv === undefined) return undefined;
  try {
    const parsed = storedRolloutSchema.parse(JSON.parse(kv.value));
    return { ...parsed, version: parsed.version ?? kv.modRevision };
  } catch {
    // Unreadable (written around the API): the controller warns and ignores it; so do writes.
    return undefined;
  }
}
