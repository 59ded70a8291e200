import type { ProbeTarget } from "./probe-protocol.js";

/** The fields that differ from node to node of one upstream; the rest are its health check's. */
const PER_NODE: ReadonlySet<string> = new Set(["address", "host", "port"]);

/**
 * One upstream's probe targets as kept for a restarted worker: when they share every field but
 * `address`, `host` and `port` (as the health registry makes them: one health check and one TLS
 * setting an upstream), one of them and three arrays of those fields; otherwise the list as is.
 */
export type ReplayTargets =
  | {
      readonly shared: ProbeTarget;
      readonly addresses: readonly string[];
      readonly hosts: readonly string[];
      readonly ports: readonly number[];
    }
  | { readonly list: readonly ProbeTarget[] };

/**
 * Targets kept only to replay them after a worker crash, without an object per node: at 20,000
 * nodes the objects were 95 bytes each, made in the turns after a first snapshot's swap; under
 * load they can still be young at the next scavenge, in the middle of a later one-route change
 * (issue 9's block). Strings and small integers in arrays are no new
 * objects: the strings are the ones the compiled snapshot already holds.
 */
export function keepForReplay(targets: readonly ProbeTarget[]): ReplayTargets {
  const shared = targets[0];
  if (shared === undefined) return { list: targets };
  const keys = Object.keys(shared);
  for (const target of targets) {
    if (Object.keys(target).length !== keys.length) return { list: targets };
    for (const key of keys) {
      if (PER_NODE.has(key)) continue;
      // `in` as well: with as many keys, a key the first target holds as undefined and this one
      // lacks would hide a key this one has and the first lacks.
      if (
        !(key in target) ||
        target[key as keyof ProbeTarget] !== shared[key as keyof ProbeTarget]
      ) {
        return { list: targets };
      }
    }
  }
  // Arrays of the exact length, not grown by push with room to spare.
  return {
    shared,
    addresses: targets.map((t) => t.address),
    hosts: targets.map((t) => t.host),
    ports: targets.map((t) => t.port),
  };
}

/** The targets `keepForReplay` was given, equal field for field. */
export function replayed(kept: ReplayTargets): ProbeTarget[] {
  if ("list" in kept) return [...kept.list];
  return kept.addresses.map((address, i) => ({
    ...kept.shared,
    address,
    host: kept.hosts[i]!,
    port: kept.ports[i]!,
  }));
}
