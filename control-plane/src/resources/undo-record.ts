/**
 * One key's before-image in a big apply's undo record (staged-apply.ts): what rolling back puts
 * back, and what a reader shows while the apply runs once etcd has compacted the history
 * before the gate (apply-gate.ts readOutsideApply).
 */
export interface UndoEntry {
  key: string;
  /** Null: the key did not exist, so rolling back deletes it. */
  value: string | null;
  /** The key's revisions before the apply; absent in records written by older versions. */
  modRevision?: number;
  createRevision?: number;
}

export function parseUndo(value: string): UndoEntry[] {
  const parsed = JSON.parse(value) as unknown;
  if (!Array.isArray(parsed)) throw new Error("undo record is not a list");
  return parsed as UndoEntry[];
}
