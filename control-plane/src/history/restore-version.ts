import type { ConfigAudit } from "../journal/config-audit.js";
import { allCommitted } from "../resources/all-committed.js";
import type { ApplyOptions, ApplyResult, ConfigService } from "../resources/config-service.js";
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
   * `version` is a rollout's base (a published snapshot's, which need not be a config version
   * nor have a kept entry): restore it by undoing the entries newer than it, the rollout's own
   * (of this version) among them.
   */
  rollout?: number;
  /** Token name journaled as the author. */
  author: string | undefined;
  /** Why, journaled with the rollback (a rollout rolling its canaries back). */
  reason?: string;
  /** More writes for the rollback's own commit (a rollout's new state). */
  also?: Operation[];
  /** The rollout this restore ends, by its key's mod revision (see ApplyOptions.endsRollout). */
  endsRollout?: number;
  /** Refuses the restore for what it changes (see ApplyOptions.vet); default none. */
  vet?: ApplyOptions["vet"];
}

/**
 * Restores the config of `version` as a new version: the apply path with prune, so references
 * are checked, big restores are staged, and what that version did not have is deleted. The
 * audit event and history entry commit with it, marked with where it came from and went to.
 */
export async function restoreVersion(
  options: RestoreOptions,
): Promise<
  | (Extract<ApplyResult, { ok: true }> & { mark: RollbackMark })
  | Extract<ApplyResult, { ok: false }>
> {
  const { config, history, audit, version, author } = options;
  const at =
    options.rollout === undefined
      ? await history.at(version)
      : await history.before(version, options.rollout);
  if (!at.ok) return at;
  // From the config version the restore replaces (the model's, as the write is planned on it),
  // not the store's raw revision, which node and data plane records move too.
  const markFrom = (from: number): RollbackMark => ({
    from,
    to: version,
    ...(options.reason === undefined ? {} : { reason: options.reason }),
  });
  let mark: RollbackMark | undefined;
  const result = await config.apply(
    at.resources.map(({ kind, name, spec }) => ({ kind, name, document: spec })),
    {
      prune: true,
      endsRollout: options.endsRollout,
      ...(options.vet === undefined ? {} : { vet: options.vet }),
      alsoWrite: (results, writes) => {
        const changes = results
          .filter((r) => r.action !== "unchanged")
          .map(({ kind, name, action }) => ({
            kind,
            name,
            action: action as "created" | "updated" | "deleted",
          }));
        mark = markFrom(config.configRevision);
        const kept = history.operations(author, changes, writes, mark);
        const audited = audit?.rollbackOperations(author, changes, mark);
        return {
          commit: [...(audited?.commit ?? []), ...kept.commit, ...(options.also ?? [])],
          ahead: [...(audited?.ahead ?? []), ...kept.ahead],
          ...allCommitted(audited?.committed, kept.committed),
          ...(kept.afterCommit === undefined ? {} : { afterCommit: kept.afterCommit }),
        };
      },
    },
  );
  // Nothing to write: the config already is that version's, and `from` is where it stands.
  return result.ok ? { ...result, mark: mark ?? markFrom(config.configRevision) } : result;
}
