/**
 * Applies a change set too big for one etcd transaction (etcd's defaults: 128 operations and
 * 1.5 MiB per request) so that it stays all-or-nothing for users and atomic for data planes.
 *
 * The protocol, in four kinds of transaction:
 *
 * 1. Open the gate. One transaction checks the config guard key is still at the revision the
 *    change set was planned against (no other API write since) and that no gate is set, then
 *    writes the gate key (no lease), an owner key bound to this control plane's lease, and the
 *    guard (so writers that read before this point fail their commit).
 * 2. Write in batches. Each batch transaction checks the gate and the owner key are unchanged
 *    and each of its keys is still at the revision read, then writes the batch's new values
 *    together with an undo record holding those keys' previous values. A batch and its undo
 *    record land together or not at all, so the undo records always describe exactly what has
 *    been written.
 * 3. Close the gate: delete gate and owner, write the guard. This one revision is where the
 *    whole apply becomes visible: the snapshot builder publishes nothing while the gate is set,
 *    and GET reads the config at the gate's revision, before the first batch.
 * 4. Or roll back: on any failure, each undo record is replayed (previous values put back,
 *    created keys deleted) and removed in one transaction, then the gate is deleted.
 *
 * The owner lease is short (a few seconds) and kept alive by a timer while the apply runs
 * (apply-lease-keeper.ts), so a slow but live owner keeps its gate however long a batch takes.
 * A control plane that dies half-way stops renewing it; within one TTL etcd deletes the owner
 * key, so its remaining batches could not commit even if it came back, and any control plane's
 * sweep or next write (recoverAbandonedApply) finds a gate without an owner and rolls it back
 * from the undo records. Rolling back twice is harmless: each record is removed by the transaction that
 * replays it, guarded by that record's revision.
 *
 * Other writers: every API write checks the gate is absent in its own transaction, so while an
 * apply runs they are refused with 409 and nothing interleaves. Keys written around the API
 * fail the batch that covers them (per-key compares), which rolls the apply back.
 */
import { randomBytes } from "node:crypto";
import type { Compare, KeyValue, Operation, Store, TxnLimits } from "../store/store.js";
import {
  type ApplyGate,
  applyGateKey,
  applyOwnerKey,
  applyUndoPrefix,
  encodeGate,
  findGate,
} from "./apply-gate.js";
import { keepApplyLeaseAlive } from "./apply-lease-keeper.js";
import { type ApplyOwner, encodeOwner, parseOwner } from "./apply-owner.js";
import { parseUndo, type UndoEntry } from "./undo-record.js";

/** One planned write and the key as it was read when planning. */
export interface StagedWrite {
  operation: Operation;
  before: KeyValue | undefined;
}

export interface StagedApplyHooks {
  /** Runs before each batch; a throw fails the apply there (tests use it to fail half-way). */
  beforeBatch?(index: number): Promise<void> | void;
}

export interface StagedApplyInput {
  store: Store;
  prefix: string;
  /** The config guard key and the mod revision the plan was read at (0: absent). */
  guard: Compare;
  writes: readonly StagedWrite[];
  hooks?: StagedApplyHooks;
  /** Lifetime of the owner lease without renewal: how long a dead owner blocks others; default 5 s. */
  leaseTtlSeconds?: number;
  /** Written in the commit that closes the gate (the audit event), so only a whole apply has them. */
  closeOperations?: readonly Operation[];
  /** Recorded in the owner key, so this control plane restarted can take the apply over. */
  owner?: ApplyOwner;
  /**
   * Keys written around the gate (the rollout key: a promote writes it alone) that must stay as
   * planned: checked when the gate opens and again when it closes. Default none.
   */
  fences?: readonly Compare[];
}

export type StagedApplyResult =
  | { ok: true; revision: number; revisions: Map<string, number> }
  /** Another write landed after the plan was read (or a fence moved); nothing stays written, plan again. */
  | { ok: false; reason: "conflict" }
  /** Failed after the gate opened; rolled back (or left to the sweep if that failed too). */
  | { ok: false; reason: "failed"; error: unknown };

/**
 * Short, since a timer renews it whatever the apply is doing: a crashed owner blocks other
 * writers for this long, and two renewals (every third of it) may fail before a live one loses it.
 */
export const DEFAULT_APPLY_LEASE_TTL_SECONDS = 5;
/** Batch transactions sent before waiting for one to finish. */
const BATCHES_IN_FLIGHT = 4;
/** Per undo entry: the JSON punctuation around key and value, and its two revisions. */
const UNDO_ENTRY_OVERHEAD = 96;

export async function stagedApply(input: StagedApplyInput): Promise<StagedApplyResult> {
  const { store, prefix, writes } = input;
  const ttl = input.leaseTtlSeconds ?? DEFAULT_APPLY_LEASE_TTL_SECONDS;
  const id = randomBytes(8).toString("hex");
  const gateKey = applyGateKey(prefix);
  const ownerKey = applyOwnerKey(prefix, id);
  const lease = await store.grantLease(ttl);
  const revoke = () => store.revokeLease(lease).catch(() => undefined);
  const fences = input.fences ?? [];

  let opened: { succeeded: boolean; revision: number };
  try {
    opened = await store.commit(
      [input.guard, { key: gateKey, modRevision: 0 }, ...fences],
      [
        {
          type: "put",
          key: gateKey,
          value: encodeGate({ id, changes: writes.length, startedAt: new Date().toISOString() }),
        },
        { type: "put", key: ownerKey, value: encodeOwner(id, input.owner), lease },
        { type: "put", key: input.guard.key, value: `apply ${id}` },
      ],
    );
  } catch (error) {
    await revoke();
    throw error;
  }
  if (!opened.succeeded) {
    await revoke();
    return { ok: false, reason: "conflict" };
  }
  const gate: ApplyGate = { id, changes: writes.length, startedAt: "", revision: opened.revision };
  const held: Compare[] = [
    { key: gateKey, modRevision: opened.revision },
    { key: ownerKey, modRevision: opened.revision },
  ];
  const keeper = keepApplyLeaseAlive(store, lease, ttl);
  const revisions = new Map<string, number>();
  try {
    const batches = splitBatches(writes, store.txnLimits, held.length);
    const writeBatch = async (index: number, batch: StagedWrite[]) => {
      const undo: UndoEntry[] = batch.map((write) => ({
        key: write.operation.key,
        value: write.before?.value ?? null,
        // So a reader can show the key as it was, ETag included, without etcd's history.
        modRevision: write.before?.modRevision,
        createRevision: write.before?.createRevision,
      }));
      const result = await store.commit(
        [
          ...held,
          ...batch.map((write) => ({
            key: write.operation.key,
            modRevision: write.before?.modRevision ?? 0,
          })),
        ],
        [
          { type: "put", key: undoKey(prefix, id, index), value: JSON.stringify(undo) },
          ...batch.map((write) => write.operation),
        ],
      );
      if (!result.succeeded) {
        throw new Error(
          `batch ${index + 1} of ${batches.length} was refused: a key changed or this control plane lost its lease`,
        );
      }
      for (const write of batch) revisions.set(write.operation.key, result.revision);
    };
    // Batches touch disjoint keys and each carries its own undo record, so several can be in
    // flight at once; etcd's per-request latency, not its throughput, is what bounds one at a time.
    const inFlight = new Set<Promise<void>>();
    let failure: { error: unknown } | undefined;
    for (const [index, batch] of batches.entries()) {
      if (failure !== undefined) break;
      try {
        await input.hooks?.beforeBatch?.(index);
        keeper.check();
      } catch (error) {
        failure = { error };
        break;
      }
      const pending: Promise<void> = writeBatch(index, batch)
        .catch((error: unknown) => {
          failure ??= { error };
        })
        .finally(() => inFlight.delete(pending));
      inFlight.add(pending);
      if (inFlight.size >= BATCHES_IN_FLIGHT) await Promise.race(inFlight);
    }
    // Every batch settles before deciding: a rollback must see every undo record written.
    await Promise.all(inFlight);
    if (failure !== undefined) throw failure.error;
    const closed = await store.commit(
      [...held, ...fences],
      [
        { type: "delete", key: gateKey },
        { type: "delete", key: ownerKey },
        { type: "put", key: input.guard.key, value: `applied ${id}` },
        ...(input.closeOperations ?? []),
      ],
    );
    if (!closed.succeeded) {
      if (await moved(store, fences)) throw new FenceMoved();
      throw new Error("this control plane lost its lease before the end");
    }
    keeper.stop();
    await revoke();
    // Garbage once the gate is gone; a failure here is swept by recoverAbandonedApply.
    await deleteUndoRecords(store, prefix, id).catch(() => undefined);
    return { ok: true, revision: closed.revision, revisions };
  } catch (error) {
    // The undo records are the truth about what was written; replay them now rather than
    // waiting for the lease to run out. If etcd is unreachable, the sweep does it later.
    await rollBack(store, prefix, input.guard.key, gate).catch(() => undefined);
    keeper.stop();
    await revoke();
    // Rolled back because a fence moved: plan again, as when the guard moved before opening.
    if (error instanceof FenceMoved) return { ok: false, reason: "conflict" };
    return { ok: false, reason: "failed", error };
  }
}

/** The closing commit failed because a fence key changed while the apply ran. */
class FenceMoved extends Error {}

/** True when any fence's key is no longer at its revision. */
async function moved(store: Store, fences: readonly Compare[]): Promise<boolean> {
  const now = await Promise.all(fences.map((fence) => store.get(fence.key)));
  return fences.some((fence, index) => (now[index]?.modRevision ?? 0) !== fence.modRevision);
}

/**
 * Replays a gate's undo records and deletes the gate. Returns false when the gate changed
 * meanwhile (another control plane finished the rollback first).
 */
export async function rollBack(
  store: Store,
  prefix: string,
  guardKey: string,
  gate: ApplyGate,
): Promise<boolean> {
  const gateKey = applyGateKey(prefix);
  const gateHeld: Compare = { key: gateKey, modRevision: gate.revision };
  const records = await store.range(applyUndoPrefix(prefix, gate.id));
  for (const record of [...records.items].reverse()) {
    const entries = parseUndo(record.value);
    const result = await store.commit(
      [gateHeld, { key: record.key, modRevision: record.modRevision }],
      [
        ...entries.map(
          (entry): Operation =>
            entry.value === null
              ? { type: "delete", key: entry.key }
              : { type: "put", key: entry.key, value: entry.value },
        ),
        { type: "delete", key: record.key },
      ],
    );
    if (!result.succeeded && (await store.get(gateKey))?.modRevision !== gate.revision) {
      return false;
    }
  }
  const closed = await store.commit(
    [gateHeld],
    [
      { type: "delete", key: gateKey },
      { type: "delete", key: applyOwnerKey(prefix, gate.id) },
      { type: "put", key: guardKey, value: `rolled back ${gate.id}` },
    ],
  );
  return closed.succeeded;
}

export type Recovery = "idle" | "running" | "rolled-back";

/**
 * The sweep every control plane runs now and then: rolls back an apply whose control plane
 * died (gate set, owner key gone with its lease) and removes undo records left by a finished
 * apply. Cheap when there is nothing to do: one read of two small key ranges.
 */
export async function recoverAbandonedApply(
  store: Store,
  prefix: string,
  guardKey: string,
): Promise<Recovery> {
  const gateKey = applyGateKey(prefix);
  const read = await store.range([gateKey, applyUndoPrefix(prefix)]);
  const gate = findGate(prefix, read.items);
  if (gate === undefined) {
    const leftovers = read.items.filter((item) => item.key !== gateKey);
    const batchSize = Math.max(1, Math.min(store.txnLimits.maxOps - 1, 1000));
    for (let i = 0; i < leftovers.length; i += batchSize) {
      // Only while still no gate: a new apply's undo records must survive.
      await store.commit(
        [{ key: gateKey, modRevision: 0 }],
        leftovers.slice(i, i + batchSize).map((item) => ({ type: "delete", key: item.key })),
      );
    }
    return "idle";
  }
  if ((await store.get(applyOwnerKey(prefix, gate.id))) !== undefined) return "running";
  await rollBack(store, prefix, guardKey, gate);
  return "rolled-back";
}

/**
 * Takes over an apply left by a previous incarnation of this control plane (same slot, another
 * boot: see apply-owner.ts) without waiting for its lease: revokes that lease, which deletes
 * the owner key so none of the dead apply's batches can commit any more, then rolls it back.
 * False when the gate's owner is anyone else (or gone: recoverAbandonedApply's case).
 */
export async function takeOverOwnApply(
  store: Store,
  prefix: string,
  guardKey: string,
  gate: ApplyGate,
  self: ApplyOwner,
): Promise<boolean> {
  const ownerKey = applyOwnerKey(prefix, gate.id);
  const owner = await store.get(ownerKey);
  if (owner === undefined) return false;
  const recorded = parseOwner(owner.value);
  if (recorded === undefined || recorded.slot !== self.slot || recorded.boot === self.boot) {
    return false;
  }
  if (owner.lease !== undefined) {
    await store.revokeLease(owner.lease);
  } else {
    await store.commit(
      [{ key: ownerKey, modRevision: owner.modRevision }],
      [{ type: "delete", key: ownerKey }],
    );
  }
  // Rolled back by someone else meanwhile is as good: either way the gate is gone.
  await rollBack(store, prefix, guardKey, gate);
  return true;
}

/** Groups writes so each batch, with its undo record and compares, fits one transaction. */
export function splitBatches(
  writes: readonly StagedWrite[],
  limits: TxnLimits,
  heldCompares: number,
): StagedWrite[][] {
  // Compares: held + one per key; operations: one per key + the undo record.
  const maxKeys = Math.max(1, Math.min(limits.maxOps - heldCompares, limits.maxOps - 1));
  const batches: StagedWrite[][] = [];
  let current: StagedWrite[] = [];
  let bytes = 0;
  for (const write of writes) {
    const size = writeBytes(write);
    if (current.length > 0 && (current.length >= maxKeys || bytes + size > limits.maxBytes)) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(write);
    bytes += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/** Bytes a write adds to its batch: the key (write, compare, undo), new and old values. */
export function writeBytes(write: StagedWrite): number {
  const op = write.operation;
  const value = op.type === "put" ? Buffer.byteLength(op.value) : 0;
  const before = write.before === undefined ? 0 : Buffer.byteLength(write.before.value);
  return 3 * Buffer.byteLength(op.key) + value + before + UNDO_ENTRY_OVERHEAD;
}

function undoKey(prefix: string, id: string, index: number): string {
  return `${applyUndoPrefix(prefix, id)}${String(index).padStart(8, "0")}`;
}

async function deleteUndoRecords(store: Store, prefix: string, id: string): Promise<void> {
  const records = await store.range(applyUndoPrefix(prefix, id));
  const batchSize = Math.max(1, Math.min(store.txnLimits.maxOps, 1000));
  for (let i = 0; i < records.items.length; i += batchSize) {
    await store.commit(
      [],
      records.items.slice(i, i + batchSize).map((item) => ({ type: "delete", key: item.key })),
    );
  }
}
