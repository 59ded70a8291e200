import type { CompiledSnapshot, CompiledUpstream } from "../compiler/compiled-types.js";
import { FrozenCompiledSnapshot } from "../compiler/frozen-compiled-snapshot.js";
import { healthTargets } from "../health/health-targets.js";
import type { RemovedNames } from "../metrics/removed-names.js";
import { removedNames } from "./removed-names.js";

/** What a swap changed, for the steps after it to do work in proportion. */
export interface SnapshotDiff {
  /**
   * Upstreams added or whose nodes or health check changed (the new one), and removed ones
   * (undefined): what health state and probes must follow.
   */
  readonly upstreams: ReadonlyMap<string, CompiledUpstream | undefined>;
  /**
   * Node addresses whose pools may now be built with other settings or be unused: those of
   * changed upstreams and of the upstreams of changed routes, before and after. Undefined:
   * any address may be (a whole snapshot).
   */
  readonly addresses: ReadonlySet<string> | undefined;
  /**
   * When `next` was compiled from a delta on `previous`: the upstreams it recompiled, added or
   * removed (whatever their nodes), for state kept per upstream. Undefined: any may have.
   */
  readonly changed: ReadonlySet<string> | undefined;
  /** Routes, upstreams and tenants gone from the config: the metrics drop their series. */
  readonly removed: RemovedNames;
}

/**
 * What changed from `previous` to `next`. A snapshot compiled from a delta on `previous` says
 * so itself (FrozenCompiledSnapshot.changes), which costs what the delta touched; otherwise
 * upstreams are compared by the identity of their compiled objects (one lookup per upstream,
 * a whole snapshot recompiles them all anyway) and every address counts as changed.
 */
export function diffSnapshots(
  previous: CompiledSnapshot | undefined,
  next: CompiledSnapshot,
): SnapshotDiff {
  const upstreams = new Map<string, CompiledUpstream | undefined>();
  const changes = next instanceof FrozenCompiledSnapshot ? next.changes : undefined;
  if (previous === undefined || changes === undefined || changes.base.deref() !== previous) {
    for (const [name, upstream] of next.upstreams) {
      if (!sameProbing(previous?.upstreams.get(name), upstream)) upstreams.set(name, upstream);
    }
    for (const name of previous?.upstreams.keys() ?? []) {
      if (!next.upstreams.has(name)) upstreams.set(name, undefined);
    }
    return {
      upstreams,
      addresses: undefined,
      changed: undefined,
      removed: removedNames(previous, next),
    };
  }
  const addresses = new Set<string>();
  const addNodes = (upstream: CompiledUpstream | undefined) => {
    for (const node of upstream?.nodes ?? []) addresses.add(node.address);
  };
  for (const name of changes.upstreams) {
    const before = previous.upstreams.get(name);
    const after = next.upstreams.get(name);
    if (!sameProbing(before, after)) upstreams.set(name, after);
    addNodes(before);
    addNodes(after);
  }
  for (const route of [...changes.removedRoutes, ...changes.addedRoutes]) {
    for (const target of route.targets) addNodes(target.upstream);
  }
  return {
    upstreams,
    addresses,
    changed: changes.upstreams,
    removed: removedNames(previous, next),
  };
}

/**
 * Whether two compiled upstreams watch the same nodes the same way: their health targets (what
 * the prober is given, health-targets.ts) are equal field by field, nested objects one level
 * deep, so a field added to HealthTarget is compared without a change here. A whole snapshot
 * recompiles every upstream; this keeps a reconnect from handing 20,000 unchanged nodes to the
 * prober again.
 */
function sameProbing(a: CompiledUpstream | undefined, b: CompiledUpstream | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined || a.nodes.length !== b.nodes.length) return false;
  const before = healthTargets([a]);
  const after = healthTargets([b]);
  return before.every((target, i) => shallowEqual(target, after[i], 1));
}

function shallowEqual(a: unknown, b: unknown, depth: number): boolean {
  if (a === b) return true;
  if (depth < 0 || typeof a !== "object" || typeof b !== "object" || a === null || b === null) {
    return false;
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = Object.keys(x);
  if (keys.length !== Object.keys(y).length) return false;
  return keys.every((key) => shallowEqual(x[key], y[key], depth - 1));
}
