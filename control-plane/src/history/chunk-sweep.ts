/**
 * Deleting the chunk keys of entries a committed write trimmed, in commits of their own.
 *
 * Why apart from the write: a big entry has hundreds of chunks, more than the write's commit
 * takes, and once its entry is gone nothing reads them, so they can go after it at leisure.
 */
import type { Logger } from "pino";
import type { Operation, Store } from "../store/store.js";

/** Chunk keys one background delete carries. */
const CHUNK_DELETE_BATCH = 100;

/**
 * Deletes chunk keys whose entry a committed write deleted, in commits of their own. One that
 * fails is left to the next re-read of the keys, which finds it without an entry.
 */
export async function deleteChunks(
  store: Store,
  keys: readonly string[],
  logger: Logger | undefined,
): Promise<void> {
  const batch = Math.max(1, Math.min(store.txnLimits.maxOps, CHUNK_DELETE_BATCH));
  try {
    for (let i = 0; i < keys.length; i += batch) {
      await store.commit(
        [],
        keys.slice(i, i + batch).map((key): Operation => ({ type: "delete", key })),
      );
    }
  } catch (error) {
    logger?.warn({ err: error }, "config history: trimmed undo chunks could not be deleted");
  }
}
