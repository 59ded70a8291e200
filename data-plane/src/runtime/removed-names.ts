import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { FrozenCompiledSnapshot } from "../compiler/frozen-compiled-snapshot.js";
import { NOTHING_REMOVED, type RemovedNames } from "../metrics/removed-names.js";

/**
 * The route, upstream and tenant names `previous` configured and `next` does not. A snapshot
 * compiled from a delta on `previous` costs what the delta touched (its own changes); a whole
 * snapshot compares every name, as its compile already walked them all.
 */
export function removedNames(
  previous: CompiledSnapshot | undefined,
  next: CompiledSnapshot,
): RemovedNames {
  if (previous === undefined) return NOTHING_REMOVED;
  const changes = next instanceof FrozenCompiledSnapshot ? next.changes : undefined;
  if (changes !== undefined && changes.base.deref() === previous) {
    const wire = (next as FrozenCompiledSnapshot).wire;
    return {
      // A changed route is taken out and put back: only one not put back is gone.
      routes: gone(
        changes.removedRoutes.map((route) => route.name),
        (name) => wire.routes.has(name),
      ),
      upstreams: gone(changes.upstreams, (name) => next.upstreams.has(name)),
      tenants: gone(changes.removedTenants, (name) => wire.tenants.has(name)),
    };
  }
  const before = namesOf(previous);
  const after = namesOf(next);
  return {
    routes: gone(before.routes.keys(), (name) => after.routes.has(name)),
    upstreams: gone(previous.upstreams.keys(), (name) => next.upstreams.has(name)),
    tenants: gone(before.tenants.keys(), (name) => after.tenants.has(name)),
  };
}

function gone(names: Iterable<string>, kept: (name: string) => boolean): ReadonlySet<string> {
  const removed = new Set<string>();
  for (const name of names) if (!kept(name)) removed.add(name);
  return removed;
}

/** A Set of names, or a Map by name (a Set's keys() are its values). */
type Names = Pick<ReadonlySet<string>, "keys" | "has">;

/** A snapshot's route and tenant names, from its wire maps when it has them (no copy). */
function namesOf(snapshot: CompiledSnapshot): { routes: Names; tenants: Names } {
  if (snapshot instanceof FrozenCompiledSnapshot) return snapshot.wire;
  return {
    routes: new Set(snapshot.source.routes.map((route) => route.name)),
    tenants: new Set(snapshot.source.tenants.map((tenant) => tenant.name)),
  };
}
