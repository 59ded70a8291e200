import type { ConfigHistory } from "../history/config-history.js";
import type { ConfigAudit } from "../journal/config-audit.js";
import { allCommitted } from "../resources/all-committed.js";
import type { AuditSink } from "./audit-write.js";

/**
 * One sink for what a config write journals in its own commit: the audit event (every write)
 * and the history entry (config writes only: they are the ones that pass the keys they write;
 * token and registry writes are audited but are not config versions).
 */
export function configJournal(
  audit: Pick<ConfigAudit, "operations" | "changeWrites"> | undefined,
  history: Pick<ConfigHistory, "operations"> | undefined,
): AuditSink {
  if (history === undefined) return audit;
  return {
    operations: (token, changes, writes) => {
      if (writes === undefined) return audit?.operations(token, changes) ?? [];
      // A config write: long change lists go ahead in chunks, for the audit as for the history.
      const audited = audit?.changeWrites(token, changes) ?? { commit: [], ahead: [] };
      const kept = history.operations(token, changes, writes);
      return {
        commit: [...audited.commit, ...kept.commit],
        ahead: [...audited.ahead, ...kept.ahead],
        ...allCommitted(audited.committed, kept.committed),
        ...(kept.afterCommit === undefined ? {} : { afterCommit: kept.afterCommit }),
      };
    },
  };
}
