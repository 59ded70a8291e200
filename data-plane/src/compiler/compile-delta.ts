import {
  type BreakerPolicy,
  type ConfigProblem,
  formatProblems,
  type Route,
  type RouteReferences,
  type SnapshotDelta,
  type Upstream,
  type UpstreamReferences,
  validateDelta,
} from "@clawgate/proto";
import { TenantKeys } from "../policy/tenant-keys.js";
import { UpstreamFileError } from "../upstream/upstream-tls.js";
import {
  addAddress,
  addName,
  type CompileIndex,
  removeAddress,
  removeName,
  upstreamsOf,
} from "./compile-index.js";
import { compileRoute } from "./compile-route.js";
import { compileUpstream } from "./compile-upstream.js";
import type { CompiledRoute, CompiledUpstream, CompileResult } from "./compiled-types.js";
import { deepFreeze } from "./freeze.js";
import { FrozenCompiledSnapshot } from "./frozen-compiled-snapshot.js";

/**
 * Compiles `delta` on top of `base`, the snapshot of its base_version, into the snapshot of
 * the delta's version, doing only what the delta touches: the routes and upstreams it carries,
 * the upstreams naming a breaker it changes, and the routes sending to an upstream that was
 * recompiled. Every other CompiledUpstream and CompiledRoute is the base's own object, and the
 * route table is updated, not rebuilt. A refused delta changes nothing; one that compiles takes
 * the base's compile index over (see CompileIndex), so the base takes no further delta.
 */
export function compileDelta(base: FrozenCompiledSnapshot, delta: SnapshotDelta): CompileResult {
  const index = base.index();
  if (index === undefined || delta.baseVersion !== BigInt(base.version)) {
    const reason = `delta ${delta.version} is on version ${delta.baseVersion}, not on ${base.version}`;
    return {
      ok: false,
      reason,
      problems: [{ kind: "snapshot", name: "", field: "baseVersion", message: reason }],
    };
  }
  const removedUpstreams = new Set(delta.removedUpstreams);
  const removedBreakers = new Set(delta.removedBreakers);
  const removedRoutes = new Set(delta.removedRoutes);
  const changedUpstreams = new Map(delta.upstreams.map((u) => [u.name, u]));
  const changedBreakers = new Map(delta.breakers.map((b) => [b.name, b]));
  const changedRoutes = new Map(delta.routes.map((r) => [r.name, r]));
  const breakerNamed = (name: string) =>
    changedBreakers.get(name) ?? (removedBreakers.has(name) ? undefined : index.breakers.get(name));

  const problems = validateDelta(delta, {
    routes: referencingRoutes(base, index, delta, removedUpstreams, changedRoutes),
    upstreams: referencingUpstreams(base, index, delta, removedBreakers, changedUpstreams),
    upstreamNames: {
      has: (name) =>
        changedUpstreams.has(name) || (base.upstreams.has(name) && !removedUpstreams.has(name)),
    },
    breakerNames: { has: (name) => breakerNamed(name) !== undefined },
  });
  if (problems.length > 0) return { ok: false, reason: formatProblems(problems), problems };

  // Compile first, touching nothing the base owns: a bug that throws here leaves it whole.
  // Only what the delta brought is frozen; every other resource was frozen when it came.
  for (const resource of [delta.routes, delta.upstreams, delta.breakers, delta.tenants]) {
    deepFreeze(resource);
  }
  const wire = base.wire.next(delta);
  // Upstreams to compile: those the delta carries, and those whose breaker policy changed.
  const recompile = new Map<string, Upstream>(changedUpstreams);
  for (const name of changedBreakers.keys()) {
    for (const upstream of index.upstreamsByBreaker.get(name) ?? []) {
      if (recompile.has(upstream) || removedUpstreams.has(upstream)) continue;
      const current = base.upstreams.get(upstream);
      if (current !== undefined)
        recompile.set(upstream, base.wire.upstreams.get(upstream) ?? current.source);
    }
  }
  const compiledUpstreams = new Map<string, CompiledUpstream>();
  const breakers = { get: breakerNamed } as ReadonlyMap<string, BreakerPolicy>;
  const fileProblems: ConfigProblem[] = [];
  for (const [name, upstream] of recompile) {
    try {
      compiledUpstreams.set(name, compileUpstream(upstream, breakers));
    } catch (error) {
      // A TLS file this machine cannot read: refused like a whole snapshot naming it would be.
      if (!(error instanceof UpstreamFileError)) throw error;
      fileProblems.push(...error.problems);
    }
  }
  if (fileProblems.length > 0) {
    return { ok: false, reason: formatProblems(fileProblems), problems: fileProblems };
  }
  // The base's map with the recompiled upstreams in and the removed ones out, copying neither.
  const upstreams = base.upstreams.with(compiledUpstreams, removedUpstreams);

  // Routes to compile: those the delta carries, and those sending to a recompiled upstream.
  const routeSources = new Map<string, Route>(changedRoutes);
  for (const upstream of recompile.keys()) {
    for (const name of index.routesByUpstream.get(upstream) ?? []) {
      const route = index.routes.get(name);
      if (route !== undefined && !routeSources.has(name) && !removedRoutes.has(name)) {
        routeSources.set(name, route.source);
      }
    }
  }
  // Tenants live in the snapshot's one key index, which auth policies read through the
  // snapshot a request was routed by: a changed tenant swaps that index and recompiles no route
  // (recompiling every auth route took seconds at 8,000 of them, proxying stalled meanwhile).
  // Only going from no tenants to some, or back, recompiles the auth routes: rate-limit and
  // token-budget compile into a route only when a tenant can exist.
  const tenantsChanged = delta.tenants.length > 0 || delta.removedTenants.length > 0;
  const tenants = tenantsChanged ? wire.tenants : index.tenants;
  const tenantKeys = tenantsChanged ? new TenantKeys(wire.tenants.values()) : base.tenantKeys;
  if (tenantsChanged && (index.tenants.size === 0) !== (tenants.size === 0)) {
    for (const name of index.authRoutes) {
      const route = index.routes.get(name);
      if (route !== undefined && !routeSources.has(name) && !removedRoutes.has(name)) {
        routeSources.set(name, route.source);
      }
    }
  }
  const compiledRoutes = new Map<string, CompiledRoute>();
  for (const [name, route] of routeSources) {
    compiledRoutes.set(name, compileRoute(route, upstreams, index.poolSettings, tenants));
  }
  const removed: CompiledRoute[] = [];
  for (const name of new Set([...removedRoutes, ...compiledRoutes.keys()])) {
    const old = index.routes.get(name);
    if (old !== undefined) removed.push(old);
  }
  const added = [...compiledRoutes.values()];
  const table = base.table().update(removed, added);

  // Everything compiled: bring the index in line, in place, and hand it over.
  for (const old of removed) {
    for (const upstream of upstreamsOf(old)) removeName(index.routesByUpstream, upstream, old.name);
  }
  for (const name of removedRoutes) {
    index.routes.delete(name);
    index.authRoutes.delete(name);
  }
  for (const route of added) {
    if (route.source.auth !== undefined) index.authRoutes.add(route.name);
    else index.authRoutes.delete(route.name);
    // Set on an existing key keeps its place: the order stays that of the snapshot's routes.
    index.routes.set(route.name, route);
    for (const upstream of upstreamsOf(route))
      addName(index.routesByUpstream, upstream, route.name);
  }
  for (const name of [...removedUpstreams, ...recompile.keys()]) {
    const old = base.upstreams.get(name);
    if (old === undefined) continue;
    removeName(index.upstreamsByBreaker, old.breaker, name);
    for (const node of old.nodes) removeAddress(index.upstreamsByAddress, node.address, name);
  }
  for (const [name, upstream] of recompile) {
    addName(index.upstreamsByBreaker, upstream.breaker, name);
    for (const node of upstream.nodes) addAddress(index.upstreamsByAddress, node.address, name);
  }
  index.tenants = tenants;
  for (const name of removedBreakers) index.breakers.delete(name);
  for (const [name, breaker] of changedBreakers) index.breakers.set(name, breaker);

  return {
    ok: true,
    value: new FrozenCompiledSnapshot(
      Number(delta.version),
      Number(delta.createdAtMs),
      upstreams,
      table,
      base.handOver(),
      wire,
      tenantKeys,
      {
        base: new WeakRef(base),
        upstreams: new Set([...removedUpstreams, ...recompile.keys()]),
        removedRoutes: removed,
        addedRoutes: added,
        removedTenants: delta.removedTenants,
      },
    ),
  };
}

/** Routes whose references the delta can break: its own, and unchanged ones naming a removed upstream. */
function referencingRoutes(
  base: FrozenCompiledSnapshot,
  index: CompileIndex,
  delta: SnapshotDelta,
  removedUpstreams: ReadonlySet<string>,
  changedRoutes: ReadonlyMap<string, Route>,
): RouteReferences[] {
  const routes: RouteReferences[] = [...delta.routes];
  const removedRoutes = new Set(delta.removedRoutes);
  for (const upstream of removedUpstreams) {
    if (!base.upstreams.has(upstream)) continue;
    for (const name of index.routesByUpstream.get(upstream) ?? []) {
      const route = index.routes.get(name);
      if (route !== undefined && !changedRoutes.has(name) && !removedRoutes.has(name)) {
        routes.push(route.source);
      }
    }
  }
  return routes;
}

/** Upstreams whose breaker reference the delta can break: its own, and unchanged ones naming a removed breaker. */
function referencingUpstreams(
  base: FrozenCompiledSnapshot,
  index: CompileIndex,
  delta: SnapshotDelta,
  removedBreakers: ReadonlySet<string>,
  changedUpstreams: ReadonlyMap<string, Upstream>,
): UpstreamReferences[] {
  const upstreams: UpstreamReferences[] = [...delta.upstreams];
  const removedUpstreams = new Set(delta.removedUpstreams);
  for (const breaker of removedBreakers) {
    for (const name of index.upstreamsByBreaker.get(breaker) ?? []) {
      const upstream = base.upstreams.get(name);
      if (upstream !== undefined && !changedUpstreams.has(name) && !removedUpstreams.has(name)) {
        upstreams.push(upstream);
      }
    }
  }
  return upstreams;
}
