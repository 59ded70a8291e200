import type { BreakerPolicy, Tenant } from "@clawgate/proto";
import type { PoolSettingsCache } from "./compile-route.js";
import type { CompiledRoute } from "./compiled-types.js";

/**
 * What the newest compiled snapshot keeps so that the next delta compiles only what it
 * touches: the compiled routes by name, the policies upstreams are compiled with, and who
 * names whom (a changed upstream recompiles the routes that send to it, a changed breaker the
 * upstreams that name it).
 *
 * Deltas only ever apply to the snapshot being served, and requests never read this index, so
 * it is not copied per delta (copying maps of 10,000 routes and 20,000 nodes cost more than
 * the whole delta): a delta that compiled updates it in place and hands it to the new snapshot
 * (FrozenCompiledSnapshot.handOver), after every check has passed and every resource has
 * compiled, so a refused delta leaves it as it was.
 */
export interface CompileIndex {
  /** In the order of the snapshot's routes. */
  readonly routes: Map<string, CompiledRoute>;
  readonly breakers: Map<string, BreakerPolicy>;
  /** Upstream name -> names of the routes that send to it (single or in a split). */
  readonly routesByUpstream: Map<string, Set<string>>;
  /** Breaker name -> names of the upstreams that name it. */
  readonly upstreamsByBreaker: Map<string, Set<string>>;
  /**
   * Names of the routes with `auth`: a delta that takes the snapshot from no tenants to some,
   * or back, recompiles them (their rate-limit and token-budget policies depend on it), found
   * here rather than by a pass over every route.
   */
  readonly authRoutes: Set<string>;
  /** Node address -> names of the upstreams that hold it. */
  readonly upstreamsByAddress: Map<string, string[]>;
  /** One frozen PoolSettings per distinct setting, shared by every snapshot after this one. */
  readonly poolSettings: PoolSettingsCache;
  /**
   * The snapshot's tenants by name, as route policies were compiled with (they read only
   * whether there are any; keys are looked up in the snapshot's TenantKeys).
   */
  tenants: ReadonlyMap<string, Tenant>;
}

/** Upstream names a route sends to. */
export function upstreamsOf(route: CompiledRoute): string[] {
  return route.targets.map((target) => target.upstream.name);
}

export function addName(map: Map<string, Set<string>>, key: string, name: string): void {
  const names = map.get(key);
  if (names === undefined) map.set(key, new Set([name]));
  else names.add(name);
}

export function removeName(map: Map<string, Set<string>>, key: string, name: string): void {
  const names = map.get(key);
  if (names === undefined) return;
  names.delete(name);
  if (names.size === 0) map.delete(key);
}

export function addAddress(map: Map<string, string[]>, address: string, upstream: string): void {
  const list = map.get(address);
  if (list === undefined) map.set(address, [upstream]);
  else if (!list.includes(upstream)) list.push(upstream);
}

export function removeAddress(map: Map<string, string[]>, address: string, upstream: string): void {
  const list = map.get(address);
  if (list === undefined) return;
  const at = list.indexOf(upstream);
  if (at >= 0) list.splice(at, 1);
  if (list.length === 0) map.delete(address);
}
