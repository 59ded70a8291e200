import type { Snapshot, SnapshotDelta } from "@clawgate/proto";

/**
 * The whole snapshot a delta leads to, as the control plane would send it: resources replaced
 * in place, new ones after the rest, removed ones gone (the order WireSource keeps too). Used
 * when the cache is read at boot, where a pass over the config per delta is no concern.
 */
export function snapshotWithDelta(base: Snapshot, delta: SnapshotDelta): Snapshot {
  return {
    ...base,
    version: delta.version,
    nonce: delta.nonce,
    createdAtMs: delta.createdAtMs,
    part: 0,
    parts: 0,
    routes: patch(base.routes, delta.routes, delta.removedRoutes),
    upstreams: patch(base.upstreams, delta.upstreams, delta.removedUpstreams),
    breakers: patch(base.breakers, delta.breakers, delta.removedBreakers),
    tenants: patch(base.tenants, delta.tenants, delta.removedTenants),
  };
}

function patch<T extends { name: string }>(
  list: readonly T[],
  changed: readonly T[],
  removed: readonly string[],
): T[] {
  if (changed.length === 0 && removed.length === 0) return list as T[];
  const byName = new Map(changed.map((resource) => [resource.name, resource]));
  const gone = new Set(removed);
  const result: T[] = [];
  for (const resource of list) {
    if (gone.has(resource.name)) continue;
    const replacement = byName.get(resource.name);
    result.push(replacement ?? resource);
    byName.delete(resource.name);
  }
  for (const resource of byName.values()) result.push(resource);
  return result;
}
