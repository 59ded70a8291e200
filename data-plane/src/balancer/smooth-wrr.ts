/** Anything smooth weighted round robin can share traffic across. */
export interface Weighted {
  /** Positive integer; a share of traffic in proportion to the sum of all weights. */
  readonly weight: number;
}

/**
 * Smooth weighted round robin, the nginx algorithm: every pick adds each item's weight to
 * its running "current" weight, takes the largest (the first one on ties), and subtracts the
 * total from the winner. Weights 5,1,1 give a,a,b,a,c,a,a: the heavy item is spread out
 * instead of being picked five times in a row.
 *
 * One picker is built per upstream (or per split route) per compiled snapshot, so a reload
 * starts a fresh sequence and a picker never sees another version's items. Its only mutable
 * state is the private current-weight array; the item list is frozen.
 */
export class SmoothWrrPicker<T extends Weighted> {
  readonly items: readonly T[];
  readonly #current: Float64Array;

  constructor(items: readonly T[]) {
    this.items = Object.isFrozen(items) ? items : Object.freeze(items.slice());
    this.#current = new Float64Array(items.length);
    Object.freeze(this);
  }

  /**
   * Picks the next item, or undefined when there is none to pick. `skip` (for health or
   * quarantine) removes items from this round only: skipped items neither gain weight nor
   * count toward the total, as in nginx, so the sequence stays smooth over the rest.
   */
  pick(skip?: (item: T) => boolean): T | undefined {
    const items = this.items;
    const current = this.#current;
    const count = items.length;
    if (count === 1 && skip === undefined) return items[0];
    let total = 0;
    let best = -1;
    let bestWeight = 0;
    for (let i = 0; i < count; i++) {
      const item = items[i]!;
      if (skip?.(item)) continue;
      const weight = current[i]! + item.weight;
      current[i] = weight;
      total += item.weight;
      if (best === -1 || weight > bestWeight) {
        best = i;
        bestWeight = weight;
      }
    }
    if (best === -1) return undefined;
    current[best] = bestWeight - total;
    return items[best];
  }
}
