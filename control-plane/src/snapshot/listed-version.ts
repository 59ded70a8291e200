import type { Store } from "../store/store.js";

export interface ListedVersionInput {
  store: Store;
  /** The prefixes of the keys a snapshot is built from (config kinds, registry, apply gate). */
  contentPrefixes: readonly string[];
  /** Revision the list was read at. */
  at: number;
  /** How many keys under `contentPrefixes` the list held. */
  count: number;
  /**
   * The newest change the list can vouch for: the highest mod revision under `contentPrefixes`,
   * and the deletes recorded where the API makes them (the config guard key, put in the commit
   * of every config write, deletes included; a registry gone marker's revision).
   */
  newest: number;
}

/**
 * The version of a config read by a list rather than followed event by event: the revision of
 * its newest change, so a control plane that starts (or restarts) numbers a config as the
 * replicas that watched it change do. A list shows every put but not a delete made around the
 * API (a key deleted straight in etcd, a registration whose lease ran out while no control
 * plane watched), so `newest` is checked: when the store held more content keys at `newest`
 * than now, something was deleted since, the config at `newest` is not this one, and the
 * list's own revision is the version (one no other content can have). So is it when the check
 * cannot be made: the embedded store keeps no history, etcd may have compacted it.
 */
export async function listedVersion(input: ListedVersionInput): Promise<number> {
  const { store, contentPrefixes, at, count } = input;
  const newest = Math.max(1, input.newest);
  if (newest >= at) return at;
  try {
    const then = await store.range(contentPrefixes, { revision: newest, keysOnly: true });
    return then.items.length === count ? newest : at;
  } catch {
    return at;
  }
}
