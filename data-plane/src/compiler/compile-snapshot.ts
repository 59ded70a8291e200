import type { IncomingHttpHeaders } from "node:http";
import {
  type BreakerPolicy,
  type ConfigProblem,
  formatProblems,
  type Snapshot,
  validateSnapshot,
} from "@clawgate/proto";
import { UpstreamFileError } from "../upstream/upstream-tls.js";
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
 * Compiles a snapshot from the wire into the immutable object the request path reads. The
 * snapshot is checked first with the shared validation (the control plane's own rules), and
 * everything it refuses is a reason for the DP to NACK, never an exception: its problems name
 * the resource and field. The snapshot itself is frozen in place and kept as `source` (for
 * /config_dump).
 */
export function compileSnapshot(snapshot: Snapshot): CompileResult {
  const problems = validateSnapshot(snapshot);
  if (problems.length > 0) return { ok: false, reason: formatProblems(problems), problems };
  const version = Number(snapshot.version);
  const createdAtMs = Number(snapshot.createdAtMs);

  const breakers = new Map<string, BreakerPolicy>();
  for (const breaker of snapshot.breakers) breakers.set(breaker.name, breaker);

  const upstreams = new Map<string, CompiledUpstream>();
  const fileProblems: ConfigProblem[] = [];
  for (const upstream of snapshot.upstreams) {
    try {
      upstreams.set(upstream.name, compileUpstream(upstream, breakers));
    } catch (error) {
      // A TLS file this machine cannot read: the only thing compiling refuses.
      if (!(error instanceof UpstreamFileError)) throw error;
      fileProblems.push(...error.problems);
    }
  }
  if (fileProblems.length > 0) {
    return { ok: false, reason: formatProblems(fileProblems), problems: fileProblems };
  }

  const routes: CompiledRoute[] = [];
  const poolSettings: PoolSettingsCache = new Map();
  for (const route of snapshot.routes) routes.push(compileRoute(route, upstreams, poolSettings));

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
