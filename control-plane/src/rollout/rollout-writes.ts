/**
 * The store writes that end a rollout, each guarded by the fence: conditional on the rollout
 * key being where the decision found it, so a promote on one replica and an abort (or the
 * leader's rollback) on another cannot both succeed.
 *
 * Why apart from the controller: the controller decides; these writes make a decision stick
 * only if nothing ended the rollout meanwhile, and say so when something did.
 */
import type { Logger } from "pino";
import type { ConfigHistory } from "../history/config-history.js";
import { restoreVersion } from "../history/restore-version.js";
import type { ConfigAudit } from "../journal/config-audit.js";
import type { ConfigService } from "../resources/config-service.js";
import type { Outcome } from "../resources/errors.js";
import type { Store } from "../store/store.js";
import { parseStored, rolloutChanged } from "./rollout-fence.js";
import type { StoredRollout } from "./rollout-state.js";

export type Ended = Outcome<{ rollout: StoredRollout }>;

/** A baking rollout and its key's mod revision: what a promote or rollback decided on. */
export interface Decided {
  rollout: StoredRollout;
  modRevision: number;
}

/**
 * Writes the rollout's new state if its key is still at `decidedAt`, the revision the
 * decision was made on: a fresh read here would let a promote on one replica and an abort on
 * another both succeed. On success, the revision the state was written at.
 */
export async function writeIfUndecided(
  store: Store,
  key: string,
  rollout: StoredRollout,
  decidedAt: number,
): Promise<Outcome<{ rollout: StoredRollout; modRevision: number }>> {
  const commit = await store.commit(
    [{ key, modRevision: decidedAt }],
    [{ type: "put", key, value: JSON.stringify(rollout) }],
  );
  if (!commit.succeeded) {
    return { ok: false, error: rolloutChanged(parseStored(await store.get(key))) };
  }
  return { ok: true, rollout, modRevision: commit.revision };
}

export interface RestoreBaseOptions {
  config: ConfigService;
  history: ConfigHistory;
  audit?: Pick<ConfigAudit, "rollbackOperations"> | undefined;
  /** The rollout key, written `ended` in the restore's own commit. */
  key: string;
  logger: Pick<Logger, "error">;
}

/**
 * Restores the config of the decided rollout's base, writing `ended` in the same commit, only
 * if the rollout is still as decided; a failure is logged, and its error names the rollout and
 * its base.
 */
export async function restoreBase(
  options: RestoreBaseOptions,
  { rollout, modRevision }: Decided,
  ended: StoredRollout,
  author: string,
  reason: string,
): Promise<Awaited<ReturnType<typeof restoreVersion>>> {
  const { config, history, audit, key, logger } = options;
  const result = await restoreVersion({
    config,
    history,
    audit,
    version: rollout.baseVersion,
    rollout: rollout.version ?? Number.NaN,
    author,
    reason,
    also: [{ type: "put", key, value: JSON.stringify(ended) }],
    // A promote elsewhere since this decision makes the restore fail rather than undo it.
    endsRollout: modRevision,
  });
  if (result.ok) return result;
  logger.error(
    { version: rollout.version, baseVersion: rollout.baseVersion, error: result.error.message },
    "rollout could not be rolled back",
  );
  return {
    ok: false,
    error: {
      ...result.error,
      message: `the rollout of version ${rollout.version ?? "?"} could not be rolled back to version ${rollout.baseVersion}: ${result.error.message}`,
    },
  };
}
