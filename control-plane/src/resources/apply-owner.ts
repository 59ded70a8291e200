import { randomBytes } from "node:crypto";

/**
 * Who runs a big apply, as its owner key records it (staged-apply.ts), so that a control plane
 * restarted after dying half-way through an apply can take that apply over at once instead of
 * leaving every writer refused until the dead process's lease runs out (applyLeaseTtlSeconds).
 *
 * `slot` names a place only one live control plane can hold: its host name and admin listen
 * address (two live processes cannot both listen on one address of one host), and it is the
 * same after a restart. `boot` is drawn afresh by each process. An owner with this process's
 * slot and another boot is therefore a previous incarnation, which is dead.
 *
 * Even if the slot rule were broken (two hosts with one name and one address, as misconfigured
 * containers can be), a takeover stays safe: it revokes the owner's lease first, so the other
 * apply's remaining batches and its closing commit fail their owner compare, and it rolls back
 * from undo records that can no longer grow. Such an apply fails; none is ever half-applied.
 */
export interface ApplyOwner {
  slot: string;
  boot: string;
}

/** An owner identity for a control plane at `slot`, with a boot of its own. */
export function newApplyOwner(slot: string): ApplyOwner {
  if (slot === "") throw new RangeError("an apply owner's slot must not be empty");
  return { slot, boot: randomBytes(8).toString("hex") };
}

export function encodeOwner(id: string, owner: ApplyOwner | undefined): string {
  return owner === undefined ? id : JSON.stringify({ id, slot: owner.slot, boot: owner.boot });
}

/** The owner an owner key names; undefined for one written without (only the apply id). */
export function parseOwner(value: string): ApplyOwner | undefined {
  try {
    const parsed = JSON.parse(value) as Partial<ApplyOwner>;
    if (typeof parsed.slot === "string" && typeof parsed.boot === "string") {
      return { slot: parsed.slot, boot: parsed.boot };
    }
  } catch {
    // A bare apply id: an owner that did not say where it runs is never taken over.
  }
  return undefined;
}
