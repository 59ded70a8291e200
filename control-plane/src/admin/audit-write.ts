import type { FastifyRequest } from "fastify";
import type { KeyWrite } from "../history/config-history.js";
import type { ConfigChange } from "../journal/config-event.js";
import type { AlsoWrites } from "../resources/config-service.js";
import type { Operation } from "../store/store.js";

/**
 * What a route handler needs to journal its write: the audit journal and, for config writes
 * (which pass the keys they write), the config history; see config-journal.ts.
 */
export type AuditSink =
  | {
      operations(
        token: string | undefined,
        changes: readonly ConfigChange[],
        writes?: readonly KeyWrite[],
      ): Operation[] | AlsoWrites;
    }
  | undefined;

interface ResultLike {
  kind: string;
  name: string;
  action: string;
}

/**
 * The audit writes for a write made by this request's token, to commit with the write itself
 * (see ConfigAudit). Resources the write leaves unchanged are not listed; a write that changes
 * nothing journals nothing.
 */
export function auditOperations(
  audit: AuditSink,
  request: FastifyRequest,
  results: readonly ResultLike[],
): Operation[];
export function auditOperations(
  audit: AuditSink,
  request: FastifyRequest,
  results: readonly ResultLike[],
  writes: readonly KeyWrite[],
): Operation[] | AlsoWrites;
export function auditOperations(
  audit: AuditSink,
  request: FastifyRequest,
  results: readonly ResultLike[],
  writes?: readonly KeyWrite[],
): Operation[] | AlsoWrites {
  if (audit === undefined) return [];
  const changes = results
    .filter(isChange)
    .map(({ kind, name, action }) => ({ kind, name, action }));
  const operations = audit.operations(request.caller?.name, changes, writes);
  // Without the keys written there is no history entry, so nothing goes ahead.
  if (writes === undefined && !Array.isArray(operations)) return operations.commit;
  return operations;
}

function isChange(result: ResultLike): result is ConfigChange {
  return result.action === "created" || result.action === "updated" || result.action === "deleted";
}
