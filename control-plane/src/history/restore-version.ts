import type { ConfigAudit } from "../journal/config-audit.js";
import type { ApplyResult, ConfigService } from "../resources/config-service.js";
import type { Operation } from "../store/store.js";
import type { ConfigHistory } from "./config-history.js";
import type { RollbackMark } from "./history-entry.js";

export interface RestoreOptions {
  config: ConfigService;
  history: ConfigHistory;
  audit?: Pick<ConfigAudit, "rollbackOperations"> | undefined;
  /** The version whose config to restore. */
  version: number;
  /**
   * `version` is a published snapshot's (a rollout's base): restore the newest config version
   * at or before it, since a registered node's arrival or expiry makes a snapshot version that
   * is no config version.
   */
  atOrBefore?: boolean;
  /** Token name journaled as the author. */
  author: string | undefined;
  /** Why, journaled with the rollback (a rollout rolling its canaries back). */
  reason?: string;
  /** More writes for the rollback's own commit (a rollout's new state). */
  also?: Operation[];
}

/**
 * Restores the config of `version` as a new version: the apply path with prune, so references
 * are checked, big restores are staged, and what that version did not have is deleted. The
 * audit event and history entry commit with it, marked with where it came from and went to.
 */
export async function restoreVersion(
  options: RestoreOptions,
): Promise<ApplyResult & { mark?: RollbackMark }> {
  const { config, history, audit, version, author } = options;
  const at = await history.at(version, { atOrBefore: options.atOrBefore === true });
  if (!at.ok) return at;
  const mark: RollbackMark = {
    from: at.current,
    to: version,
    ...(options.reason === undefined ? {} : { reason: options.reason }),
  };
  const result = await config.apply(
    at.resources.map(({ kind, name, spec }) => ({ kind, name, document: spec })),
    {
      prune: true,
      alsoWrite: (results, writes) => {
        const changes = results
          .filter((r) => r.action !== "unchanged")
          .map(({ kind, name, action }) => ({
            kind,
            name,
            action: action as "created" | "updated" | "deleted",
          }));
        const kept = history.operations(author, changes, writes, mark);
        const audited = audit?.rollbackOperations(author, changes, mark);
        return {
          commit: [...(audited?.commit ?? []), ...kept.commit, ...(options.also ?? [])],
          ahead: [...(audited?.ahead ?? []), ...kept.ahead],
          ...(kept.afterCommit === undefined ? {} : { afterCommit: kept.afterCommit }),
        };
      },
    },
  );
  return result.ok ? { ...result, mark } : result;
}
