import type { IncomingHttpHeaders } from "node:http";
import type { BreakerPolicy, Snapshot } from "@clawgate/proto";
import { compileRoute, type PoolSettingsCache } from "./compile-route.js";
import { compileUpstream } from "./compile-upstream.js";
import type {
  CompiledRoute,
  CompiledSnapshot,
  CompiledUpstream,
  CompileResult,
} from "./compiled-types.js";
import { deepFreeze, frozenMap, frozenSet } from "./freeze.js";
import { RouteTable } from "./route-table.js";

export type { CompiledSnapshot, CompileResult } from "./compiled-types.js";

/**
 * Compiles a snapshot from the wire into the immutable object the request path reads.
 * Everything the wire may carry but the proxy cannot serve is a reason (naming the resource
 * and field) for the DP to NACK, never an exception. The snapshot itself is frozen in place
 * and kept as `source` (for /config_dump).
 */
export function compileSnapshot(snapshot: Snapshot): CompileResult {
  const version = Number(snapshot.version);
  if (!Number.isSafeInteger(version)) return fail("snapshot: version is beyond 2^53");
  const createdAtMs = Number(snapshot.createdAtMs);
  if (!Number.isSafeInteger(createdAtMs)) return fail("snapshot: createdAtMs is beyond 2^53");

  const breakers = new Map<string, BreakerPolicy>();
  for (const [i, breaker] of snapshot.breakers.entries()) {
    if (breaker.name === "") return fail(`breakers[${i}]: name is empty`);
    if (breakers.has(breaker.name)) return fail(`breaker "${breaker.name}": name is repeated`);
    breakers.set(breaker.name, breaker);
  }

  const upstreams = new Map<string, CompiledUpstream>();
  for (const [i, upstream] of snapshot.upstreams.entries()) {
    const compiled = compileUpstream(upstream, i, breakers);
    if (!compiled.ok) return compiled;
    if (upstreams.has(upstream.name)) return fail(`upstream "${upstream.name}": name is repeated`);
    upstreams.set(upstream.name, compiled.value);
  }

  const routes: CompiledRoute[] = [];
  const routeNames = new Set<string>();
  const poolSettings: PoolSettingsCache = new Map();
  for (const [i, route] of snapshot.routes.entries()) {
    const compiled = compileRoute(route, i, upstreams, poolSettings);
    if (!compiled.ok) return compiled;
    if (routeNames.has(route.name)) return fail(`route "${route.name}": name is repeated`);
    routeNames.add(route.name);
    routes.push(compiled.value);
  }

  const addresses = new Set<string>();
  for (const upstream of upstreams.values()) {
    for (const node of upstream.nodes) addresses.add(node.address);
  }
  const poolKeys = new Map<string, Set<string>>();
  for (const route of routes) {
    for (const target of route.targets) {
      for (const node of target.upstream.nodes) {
        const keys = poolKeys.get(node.address);
        if (keys === undefined) poolKeys.set(node.address, new Set([target.poolSettings.key]));
        else keys.add(target.poolSettings.key);
      }
    }
  }
  const frozenPoolKeys = new Map<string, ReadonlySet<string>>();
  for (const [address, keys] of poolKeys) frozenPoolKeys.set(address, frozenSet(keys));

  return {
    ok: true,
    value: new FrozenCompiledSnapshot(
      version,
      createdAtMs,
      routes.length,
      frozenMap(upstreams),
      RouteTable.build(routes),
      frozenSet(addresses),
      frozenMap(frozenPoolKeys),
      deepFreeze(snapshot),
    ),
  };
}

class FrozenCompiledSnapshot implements CompiledSnapshot {
  readonly #table: RouteTable;
  readonly #addresses: ReadonlySet<string>;
  readonly #poolKeys: ReadonlyMap<string, ReadonlySet<string>>;

  constructor(
    readonly version: number,
    readonly createdAtMs: number,
    readonly routeCount: number,
    readonly upstreams: ReadonlyMap<string, CompiledUpstream>,
    table: RouteTable,
    addresses: ReadonlySet<string>,
    poolKeys: ReadonlyMap<string, ReadonlySet<string>>,
    readonly source: Snapshot,
  ) {
    this.#table = table;
    this.#addresses = addresses;
    this.#poolKeys = poolKeys;
    Object.freeze(this);
  }

  match(
    method: string,
    host: string,
    path: string,
    headers: IncomingHttpHeaders,
  ): CompiledRoute | undefined {
    return this.#table.match(method, host, path, headers);
  }

  nodeAddresses(): ReadonlySet<string> {
    return this.#addresses;
  }

  poolKeys(): ReadonlyMap<string, ReadonlySet<string>> {
    return this.#poolKeys;
  }
}

function fail(reason: string): CompileResult {
  return { ok: false, reason };
}
