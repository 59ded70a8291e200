import {
  type BreakerPolicy,
  type ConfigProblem,
  formatProblems,
  type Snapshot,
  validateSnapshotSteps,
} from "@clawgate/proto";
import { TenantKeys } from "../policy/tenant-keys.js";
import { upstreamTlsContexts } from "../upstream/tls-context-cache.js";
import { UpstreamFileError } from "../upstream/upstream-tls.js";
import { addAddress, addName, type CompileIndex, upstreamsOf } from "./compile-index.js";
import { compileRoute, type PoolSettingsCache, tenantMap } from "./compile-route.js";
import { compileUpstream } from "./compile-upstream.js";
import type { CompiledRoute, CompiledUpstream, CompileResult } from "./compiled-types.js";
import { deepFreeze } from "./freeze.js";
import { FrozenCompiledSnapshot } from "./frozen-compiled-snapshot.js";
import { LayeredMap } from "./layered-map.js";
import { RouteTable } from "./route-table.js";
import { type WireResources, WireSource } from "./wire-source.js";

export type { CompiledSnapshot, CompileResult } from "./compiled-types.js";

/**
 * Resources compiled between two points where a caller may hand the event loop back. A boot
 * runs this code cold (interpreted, compiled lazily): 200 resources were 20 to 35 ms of CPU
 * per step there, and with ten data planes booting on two cores each ms of CPU takes about
 * five of the clock. At 50 a step stays a few ms; runInTurns still fills a turn with as many
 * steps as fit in it, so smaller steps cost a generator resume each, not more turns.
 */
export const STEP_RESOURCES = 50;

/**
 * Compiles a snapshot from the wire into the immutable object the request path reads. The
 * snapshot is checked first with the shared validation (the control plane's own rules), and
 * everything it refuses is a reason for the DP to NACK, never an exception: its problems name
 * the resource and field. The snapshot itself is frozen in place and kept as `source` (for
 * /config_dump).
 */
export function compileSnapshot(snapshot: Snapshot): CompileResult {
  const steps = compileSnapshotSteps(snapshot);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/**
 * compileSnapshot cut into steps: each `yield` is a point where the caller may let the event
 * loop run (see compileInTurns), so compiling 10,000 routes never blocks clients in one turn.
 * Nothing outside the generator changes until it returns.
 */
export function* compileSnapshotSteps(snapshot: Snapshot): Generator<void, CompileResult> {
  const problems = yield* validateSnapshotSteps(snapshot, STEP_RESOURCES);
  if (problems.length > 0) return { ok: false, reason: formatProblems(problems), problems };
  const version = Number(snapshot.version);
  const createdAtMs = Number(snapshot.createdAtMs);

  const breakers = new Map<string, BreakerPolicy>();
  for (const breaker of snapshot.breakers) breakers.set(breaker.name, breaker);
  // The wire resources by name, for the deltas that follow (WireSource).
  const wire: WireResources = {
    routes: new Map(),
    upstreams: new Map(),
    breakers: new Map(breakers),
    tenants: new Map(snapshot.tenants.map((tenant) => [tenant.name, tenant])),
  };

  const upstreams = new Map<string, CompiledUpstream>();
  const upstreamsByBreaker = new Map<string, Set<string>>();
  const upstreamsByAddress = new Map<string, string[]>();
  const fileProblems: ConfigProblem[] = [];
  let count = 0;
  for (const upstream of snapshot.upstreams) {
    wire.upstreams.set(upstream.name, upstream);
    const builds = upstreamTlsContexts.builds;
    try {
      upstreams.set(upstream.name, compileUpstream(upstream, breakers));
    } catch (error) {
      // A TLS file this machine cannot read: the only thing compiling refuses.
      if (!(error instanceof UpstreamFileError)) throw error;
      fileProblems.push(...error.problems);
    }
    addName(upstreamsByBreaker, upstream.breaker, upstream.name);
    for (const node of upstream.nodes) addAddress(upstreamsByAddress, node.address, upstream.name);
    // An upstream weighs as much as its nodes (each parsed, indexed, given a picker slot).
    count += 1 + upstream.nodes.length;
    // Reading and parsing a TLS file set (a CA bundle: up to 150 ms) is a step by itself; a
    // set already read costs a stat per file.
    if (upstreamTlsContexts.builds !== builds) count += STEP_RESOURCES;
    if (count >= STEP_RESOURCES) {
      count = 0;
      yield;
    }
  }
  if (fileProblems.length > 0) {
    return { ok: false, reason: formatProblems(fileProblems), problems: fileProblems };
  }

  const routes = new Map<string, CompiledRoute>();
  const authRoutes = new Set<string>();
  const routesByUpstream = new Map<string, Set<string>>();
  const poolSettings: PoolSettingsCache = new Map();
  const tenants = tenantMap(snapshot.tenants);
  for (const route of snapshot.routes) {
    const compiled = compileRoute(route, upstreams, poolSettings, tenants);
    routes.set(route.name, compiled);
    wire.routes.set(route.name, route);
    if (route.auth !== undefined) authRoutes.add(route.name);
    for (const upstream of upstreamsOf(compiled)) addName(routesByUpstream, upstream, route.name);
    if (++count % STEP_RESOURCES === 0) yield;
  }
  const table = yield* RouteTable.buildSteps([...routes.values()], STEP_RESOURCES);
  // Freezing walks every field of every resource: in steps too. Each list is frozen once its
  // resources are, so the deepFreeze of the whole below stops at it (it listed the 10,000
  // index keys of an unfrozen list in the turn of the swap).
  for (const list of [snapshot.routes, snapshot.upstreams, snapshot.breakers, snapshot.tenants]) {
    for (const resource of list) {
      deepFreeze(resource);
      if (++count % STEP_RESOURCES === 0) yield;
    }
    Object.freeze(list);
  }
  const index: CompileIndex = {
    routes,
    breakers,
    routesByUpstream,
    authRoutes,
    upstreamsByBreaker,
    upstreamsByAddress,
    poolSettings,
    tenants,
  };
  return {
    ok: true,
    value: new FrozenCompiledSnapshot(
      version,
      createdAtMs,
      LayeredMap.over(upstreams),
      table,
      index,
      WireSource.whole(deepFreeze(snapshot), wire),
      new TenantKeys(snapshot.tenants),
      undefined,
    ),
  };
}
