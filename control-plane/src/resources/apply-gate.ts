import { RESOURCE_KINDS, type ResourceKind } from "@clawgate/proto";
import type { KeyValue, RangeResult, Store } from "../store/store.js";
import { parseUndo } from "./undo-record.js";

/**
 * The publish gate of an apply too big for one etcd transaction (see staged-apply.ts): while
 * this key exists, the config keys may hold part of an apply, so nobody publishes them, no
 * other write starts, and readers read the config as it was at the gate's own revision.
 */
export function applyGateKey(prefix: string): string {
  return `${prefix}meta/apply-gate`;
}

/** Bound to the applying control plane's lease: gone when that control plane is. */
export function applyOwnerKey(prefix: string, id: string): string {
  return `${prefix}meta/apply-owner/${id}`;
}

/** The before-images of one apply, one key per written batch. */
export function applyUndoPrefix(prefix: string, id?: string): string {
  return `${prefix}meta/apply-undo/${id === undefined ? "" : `${id}/`}`;
}

export interface ApplyGate {
  id: string;
  /** Writes the apply makes; for messages. */
  changes: number;
  /** ISO time the apply started; for messages. */
  startedAt: string;
  /** The gate key's mod revision: the config as it was before the apply's first batch. */
  revision: number;
}

export function encodeGate(gate: Omit<ApplyGate, "revision">): string {
  return JSON.stringify({ id: gate.id, changes: gate.changes, startedAt: gate.startedAt });
}

/** The gate among `items`, if one is set; a gate nobody can parse still closes the gate. */
export function findGate(prefix: string, items: readonly KeyValue[]): ApplyGate | undefined {
  const key = applyGateKey(prefix);
  const item = items.find((candidate) => candidate.key === key);
  if (item === undefined) return undefined;
  let parsed: Partial<ApplyGate> = {};
  try {
    parsed = JSON.parse(item.value) as Partial<ApplyGate>;
  } catch {
    // Written around the API; recovery still needs its revision, and readers must wait.
  }
  return {
    id: typeof parsed.id === "string" ? parsed.id : "unknown",
    changes: typeof parsed.changes === "number" ? parsed.changes : 0,
    startedAt: typeof parsed.startedAt === "string" ? parsed.startedAt : "unknown",
    revision: item.modRevision,
  };
}

export function gateMessage(gate: ApplyGate): string {
  return `apply ${gate.id} of ${gate.changes} changes is in progress (started ${gate.startedAt}); try again when it ends`;
}

/** Key prefixes of the config documents, one per kind. */
export function kindPrefixes(prefix: string, kinds: readonly ResourceKind[] = RESOURCE_KINDS) {
  return kinds.map((kind) => `${prefix}${kind}/`);
}

/**
 * Reads `prefixes` as the config is outside any apply: at the current revision when no gate
 * is set, else at the gate's revision, before the apply's first write. The gate and the
 * prefixes come from one read, so an apply that starts meanwhile cannot leak into it.
 * When etcd has compacted the gate's revision (a long apply, auto-compaction), the config
 * before the apply is rebuilt from the apply's undo records instead (readThroughUndo).
 */
export async function readOutsideApply(
  store: Store,
  prefix: string,
  prefixes: readonly string[],
): Promise<RangeResult & { gate: ApplyGate | undefined }> {
  const gateKey = applyGateKey(prefix);
  const read = await store.range([gateKey, ...prefixes]);
  const gate = findGate(prefix, read.items);
  const items = read.items.filter((item) => item.key !== gateKey);
  if (gate === undefined) return { revision: read.revision, items, gate };
  try {
    const before = await store.range(prefixes, { revision: gate.revision });
    return { revision: before.revision, items: before.items, gate };
  } catch (error) {
    if ((error as { code?: unknown }).code !== "CLAWGATE_STORE_COMPACTED") throw error;
    return readThroughUndo(store, prefix, prefixes);
  }
}

/**
 * One key exactly, as it is outside any apply (see readOutsideApply), without a range over the
 * keys it prefixes: at the gate's revision while a gate is set; else read between two looks at
 * the gate, both finding none (only an apply begun and ended between them could slip in).
 */
export async function readKeyOutsideApply(
  store: Store,
  prefix: string,
  key: string,
): Promise<KeyValue | undefined> {
  const gateKey = applyGateKey(prefix);
  for (;;) {
    const gate = findGate(prefix, present(await store.get(gateKey)));
    if (gate === undefined) {
      const item = await store.get(key);
      // The gate still absent at the key's read means no apply had begun: the key is outside.
      const after = await store.get(gateKey);
      if (after === undefined) return item;
      continue;
    }
    try {
      return await store.get(key, { revision: gate.revision });
    } catch (error) {
      if ((error as { code?: unknown }).code !== "CLAWGATE_STORE_COMPACTED") throw error;
      const read = await readThroughUndo(store, prefix, [key]);
      return read.items.find((item) => item.key === key);
    }
  }
}

function present(item: KeyValue | undefined): KeyValue[] {
  return item === undefined ? [] : [item];
}

/**
 * The config before the running apply without etcd's history: the current keys, the gate and
 * the undo records in one read, each key an undo record names put back as it was (or left
 * out if the apply created it). A batch and its undo record commit together, and a rollback
 * removes a record in the commit that restores its keys, so at any revision the records
 * describe exactly the keys the apply has changed. With no gate left, the apply has ended
 * and the current keys are the answer.
 */
async function readThroughUndo(
  store: Store,
  prefix: string,
  prefixes: readonly string[],
): Promise<RangeResult & { gate: ApplyGate | undefined }> {
  const gateKey = applyGateKey(prefix);
  const undoPrefix = applyUndoPrefix(prefix);
  const read = await store.range([gateKey, undoPrefix, ...prefixes]);
  const gate = findGate(prefix, read.items);
  const current = read.items.filter(
    (item) => item.key !== gateKey && !item.key.startsWith(undoPrefix),
  );
  if (gate === undefined) return { revision: read.revision, items: current, gate };
  const byKey = new Map(current.map((item) => [item.key, item]));
  const records = applyUndoPrefix(prefix, gate.id);
  for (const record of read.items) {
    if (!record.key.startsWith(records)) continue;
    for (const entry of parseUndo(record.value)) {
      if (!prefixes.some((wanted) => entry.key.startsWith(wanted))) continue;
      if (entry.value === null) {
        byKey.delete(entry.key);
        continue;
      }
      byKey.set(entry.key, {
        key: entry.key,
        value: entry.value,
        modRevision: entry.modRevision ?? gate.revision,
        createRevision: entry.createRevision ?? gate.revision,
      });
    }
  }
  // As a range answers: prefix by prefix, sorted by key within each.
  const items = prefixes.flatMap((wanted) =>
    [...byKey.values()]
      .filter((item) => item.key.startsWith(wanted))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)),
  );
  return { revision: gate.revision, items, gate };
}
