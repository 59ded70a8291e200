/** How a key of the layer stands against the base. */
type Change<V> =
  /** Replaced where the base has it: iterated at the base's place. */
  | { readonly at: "base"; readonly value: V }
  /** Not in the base (or removed from it, then added again): iterated after the base. */
  | { readonly at: "end"; readonly value: V }
  /** Removed from the base. */
  | { readonly at: "gone" };

const GONE: Change<never> = Object.freeze({ at: "gone" });

/** A layer this small is never folded, whatever the base. */
const FOLD_MIN = 16;

/**
 * An immutable map that the next snapshot derives from this one in proportion to what a delta
 * changed: a shared base Map that nobody writes, and a small layer of changes on top. Copying a
 * Map of 2,000 upstreams (or 10,000 routes) per one-route delta cost more than compiling it,
 * and writing one Map in place would change what a request holding the older snapshot reads.
 *
 * `with` copies the layer only; once the layer outgrows twice the square root of the base, it
 * is folded into a new base. A fold costs the whole map but comes every 2 sqrt(n) changed
 * keys, so a change costs O(sqrt(n)) entries: some 200 at 10,000 routes, against 10,000.
 *
 * Iteration follows the order a control plane's whole snapshot would have: a replaced key at
 * its place, new keys after the rest in the order they came, removed keys gone.
 */
export class LayeredMap<K, V> implements ReadonlyMap<K, V> {
  readonly #base: ReadonlyMap<K, V>;
  readonly #layer: ReadonlyMap<K, Change<V>>;
  readonly size: number;

  private constructor(base: ReadonlyMap<K, V>, layer: ReadonlyMap<K, Change<V>>, size: number) {
    this.#base = base;
    this.#layer = layer;
    this.size = size;
    Object.freeze(this);
  }

  /** Takes `base` over as it is: the caller must never write it again. */
  static over<K, V>(base: Map<K, V>): LayeredMap<K, V> {
    return new LayeredMap(base, new Map(), base.size);
  }

  /** `set` entries put in (or replaced), then `removed` keys taken out; this map is unchanged. */
  with(set: Iterable<readonly [K, V]>, removed: Iterable<K> = []): LayeredMap<K, V> {
    const layer = new Map(this.#layer);
    let size = this.size;
    for (const [key, value] of set) {
      if (!present(this.#base, layer, key)) size++;
      const change = layer.get(key);
      if (change === undefined) {
        layer.set(key, { at: this.#base.has(key) ? "base" : "end", value });
      } else if (change.at === "gone") {
        // Gone from the base and back: a whole snapshot would list it after the rest.
        layer.delete(key);
        layer.set(key, { at: "end", value });
      } else {
        layer.set(key, { at: change.at, value });
      }
    }
    for (const key of removed) {
      if (!present(this.#base, layer, key)) continue;
      size--;
      if (this.#base.has(key)) layer.set(key, GONE);
      else layer.delete(key);
    }
    // Copying the layer costs about a third of what folding costs per entry: 2 sqrt(n)
    // balances the two.
    if (layer.size <= FOLD_MIN || layer.size * layer.size <= 4 * this.#base.size) {
      return new LayeredMap(this.#base, layer, size);
    }
    return new LayeredMap(fold(this.#base, layer), new Map(), size);
  }

  get(key: K): V | undefined {
    const change = this.#layer.get(key);
    if (change === undefined) return this.#base.get(key);
    return change.at === "gone" ? undefined : change.value;
  }

  has(key: K): boolean {
    return present(this.#base, this.#layer, key);
  }

  entries(): MapIterator<[K, V]> {
    // Without a layer the base's own iterator: no generator step per entry.
    if (this.#layer.size === 0) return this.#base.entries();
    return fold(this.#base, this.#layer).entries();
  }

  keys(): MapIterator<K> {
    if (this.#layer.size === 0) return this.#base.keys();
    return fold(this.#base, this.#layer).keys();
  }

  values(): MapIterator<V> {
    if (this.#layer.size === 0) return this.#base.values();
    return fold(this.#base, this.#layer).values();
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }

  forEach(callback: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) callback.call(thisArg, value, key, this);
  }
}

/** The base with the layer applied, in iteration order: plain loops, it runs over every key. */
function fold<K, V>(base: ReadonlyMap<K, V>, layer: ReadonlyMap<K, Change<V>>): Map<K, V> {
  const folded = new Map<K, V>();
  for (const [key, value] of base) {
    const change = layer.get(key);
    if (change === undefined) folded.set(key, value);
    else if (change.at === "base") folded.set(key, change.value);
  }
  for (const [key, change] of layer) {
    if (change.at === "end") folded.set(key, change.value);
  }
  return folded;
}

function present<K, V>(base: ReadonlyMap<K, V>, layer: ReadonlyMap<K, Change<V>>, key: K): boolean {
  const change = layer.get(key);
  return change === undefined ? base.has(key) : change.at !== "gone";
}
