function refuse(): never {
  throw new TypeError("compiled snapshots are immutable");
}

/** A Map whose mutators throw, then frozen: Object.freeze alone leaves Map.set working. */
export function frozenMap<K, V>(entries: Iterable<readonly [K, V]>): ReadonlyMap<K, V> {
  const map = new Map<K, V>(entries);
  Object.defineProperties(map, {
    set: { value: refuse },
    delete: { value: refuse },
    clear: { value: refuse },
  });
  return Object.freeze(map);
}

/** A Set whose mutators throw, then frozen. */
export function frozenSet<T>(values: Iterable<T>): ReadonlySet<T> {
  const set = new Set<T>(values);
  Object.defineProperties(set, {
    add: { value: refuse },
    delete: { value: refuse },
    clear: { value: refuse },
  });
  return Object.freeze(set);
}

/** Freezes a plain object tree (a decoded protobuf message) in place. */
export function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== "object" || Object.isFrozen(value)) return value;
  // Typed arrays (protobuf bytes) cannot be frozen; no snapshot field is bytes today.
  if (ArrayBuffer.isView(value)) return value;
  Object.freeze(value);
  for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  return value;
}
