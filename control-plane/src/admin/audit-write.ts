import type { FastifyRequest } from "fastify";
import type { ConfigAudit } from "../journal/config-audit.js";
import type { ConfigChange } from "../journal/config-event.js";

/** What a route handler needs to journal its write: the audit log, when there is one. */
export type AuditSink = Pick<ConfigAudit, "record"> | undefined;

interface ResultLike {
  kind: string;
  name: string;
  action: string;
}

/**
 * Journals a successful write with the name of the token that made it. Called by each writing
 * route after the store answered, so the revision is the one the write produced; resources the
 * write left unchanged are not listed, and a write that changed nothing is not journaled.
 */
export async function auditWrite(
  audit: AuditSink,
  request: FastifyRequest,
  revision: number,
  results: readonly ResultLike[],
): Promise<void> {
  if (audit === undefined) return;
  const changes = results
    .filter(isChange)
    .map(({ kind, name, action }) => ({ kind, name, action }));
  await audit.record({ token: request.caller?.name, revision, changes });
}

function isChange(result: ResultLike): result is ConfigChange {
  return result.action === "created" || result.action === "updated" || result.action === "deleted";
}
