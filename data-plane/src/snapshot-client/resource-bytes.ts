/**
 * Each resource of a snapshot as a field of a binary Snapshot (tag, length, bytes), kept while
 * the resource object lives. The decoder records the bytes a resource arrived as (a view into
 * the message, no copy); the disk cache writes them back rather than encoding every resource
 * of a 20,000-node config a second time after boot. A resource from a delta, or one decoded at
 * once, is encoded by the cache itself and kept here too.
 */
export const resourceBytes = new WeakMap<object, Uint8Array>();

/** Snapshot fields 3-6, the resources: the same numbers in the decoder and the cache file. */
export const SNAPSHOT_RESOURCE_FIELDS = {
  routes: 3,
  upstreams: 4,
  breakers: 5,
  tenants: 6,
} as const;
