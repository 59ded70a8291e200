import { z } from "zod";
import { configChangeSchema } from "../journal/config-event.js";

/**
 * What one config write did to one key, for undoing it: the key (relative to the prefix, so
 * `routes/api`) and its value before the write (null: it did not exist).
 */
export const undoStepSchema = z.object({ key: z.string(), before: z.string().nullable() });
export type UndoStep = z.infer<typeof undoStepSchema>;

/** A rollback's own record: the version it left and the version whose config it restored. */
export const rollbackMarkSchema = z.object({
  from: z.int(),
  to: z.int(),
  /** Why, when the control plane rolled back on its own (a rollout's canaries failing). */
  reason: z.string().optional(),
});
export type RollbackMark = z.infer<typeof rollbackMarkSchema>;

/**
 * The stored form of one history entry. Its version is not stored: the entry commits with the
 * write, so its key's mod revision is the version the write produced.
 */
export const storedHistoryEntrySchema = z.object({
  time: z.iso.datetime(),
  /** Name of the token that made the write. */
  author: z.string(),
  /** The changes, or [] when they are kept in `changeParts` chunks (see change-list.ts). */
  changes: z.array(configChangeSchema),
  /** How many chunk keys under `{prefix}history-changes/{id}/` hold the changes. */
  changeParts: z.int().min(1).optional(),
  rollback: rollbackMarkSchema.optional(),
  /**
   * The undo steps, or null when they are kept apart in `undoParts` chunks (a write too big to
   * carry them in its commit; see ConfigHistory) or, for entries written before chunks, not
   * kept at all (versions before such an entry cannot be rebuilt).
   */
  undo: z.array(undoStepSchema).nullable(),
  /** How many chunk keys hold the undo steps when `undo` is null. */
  undoParts: z.int().min(1).optional(),
});
export type StoredHistoryEntry = z.infer<typeof storedHistoryEntrySchema>;

/** One entry as GET /v1/history lists it. */
export interface HistoryItem {
  version: number;
  time: string;
  author: string;
  changes: z.infer<typeof configChangeSchema>[];
  /** "2 created, 1 updated": the change summary at a glance. */
  summary: string;
  rollback?: RollbackMark;
}

export function summarize(changes: readonly { action: string }[]): string {
  const counts = new Map<string, number>();
  for (const { action } of changes) counts.set(action, (counts.get(action) ?? 0) + 1);
  return ["created", "updated", "deleted"]
    .filter((action) => counts.has(action))
    .map((action) => `${counts.get(action)} ${action}`)
    .join(", ");
}
