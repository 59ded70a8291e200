import type { QuotaKind } from "@clawgate/proto";

/** One tenant's budget of one kind in one window (window = epoch ms / windowMs, floored). */
export interface WindowKey {
  readonly tenant: string;
  readonly kind: QuotaKind;
  readonly window: number;
  readonly windowMs: number;
}

/** What a claim on the fleet's count of a window got. */
export interface Claim {
  /** Units this replica added to its reservation (0 when the fleet had none left). */
  readonly units: number;
  /** Units the whole fleet has claimed of the window after this claim, as far as known. */
  readonly total: number;
}

/**
 * The fleet's count of each tenant window, shared by the control-plane replicas: each replica
 * reserves blocks of the limit here and hands its data planes shares of its blocks. The count is
 * what every replica reserved, plus what any of them consumed beyond its reservation (token
 * usage is known after the fact); it never grows past the limit by reservations alone.
 * A synchronous answer lets the ledger grant at once; a promise makes it answer later.
 */
export interface WindowCounter {
  /** Reserves a block of what is left under `limit`; units 0 once the fleet claimed it all. */
  reserve(key: WindowKey, limit: number): Claim | Promise<Claim>;
  /**
   * Adds `units` whatever the limit: consumption beyond this replica's reservation (positive),
   * or a reservation given back unspent (negative).
   */
  charge(key: WindowKey, units: number): Claim | Promise<Claim>;
  /** Tells `listener` of every new fleet total written by any replica; returns an unsubscribe. */
  onTotal?(listener: (key: Omit<WindowKey, "windowMs">, total: number) => void): () => void;
}

/**
 * The count when one control plane serves the whole fleet (the embedded store): nobody else
 * reserves, so a reservation is everything left, answered at once.
 */
export class LocalWindowCounter implements WindowCounter {
  readonly #totals = new Map<string, { window: number; total: number }>();

  reserve(key: WindowKey, limit: number): Claim {
    const count = this.#count(key);
    const units = Math.max(0, limit - count.total);
    count.total += units;
    return { units, total: count.total };
  }

  charge(key: WindowKey, units: number): Claim {
    const count = this.#count(key);
    count.total = Math.max(0, count.total + units);
    return { units, total: count.total };
  }

  #count(key: WindowKey): { window: number; total: number } {
    const id = `${key.kind}\u0000${key.tenant}`;
    let count = this.#totals.get(id);
    // Only the current window is kept: an older one's count no longer matters.
    if (count === undefined || count.window !== key.window) {
      count = { window: key.window, total: 0 };
      this.#totals.set(id, count);
    }
    return count;
  }
}
