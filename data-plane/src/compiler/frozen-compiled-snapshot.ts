import type { IncomingHttpHeaders } from "node:http";
import type { Snapshot } from "@clawgate/proto";
import type { TenantKeys } from "../policy/tenant-keys.js";
import type { CompileIndex } from "./compile-index.js";
import type { CompiledRoute, CompiledSnapshot, CompiledUpstream } from "./compiled-types.js";
import { frozenMap, frozenSet } from "./freeze.js";
import type { LayeredMap } from "./layered-map.js";
import type { RouteTable } from "./route-table.js";
import type { WireSource } from "./wire-source.js";

/** What a delta changed relative to the snapshot it was compiled on. */
export interface DeltaChanges {
  /**
   * The snapshot the delta was compiled on, weakly: a strong reference would chain every
   * snapshot ever applied to the one served, and the heap would grow with each delta.
   */
  readonly base: WeakRef<CompiledSnapshot>;
  /** Names of upstreams recompiled, added or removed. */
  readonly upstreams: ReadonlySet<string>;
  /** Compiled routes of the base taken out, and those put in their place or added. */
  readonly removedRoutes: readonly CompiledRoute[];
  readonly addedRoutes: readonly CompiledRoute[];
  /** Names of the tenants the delta removed (one it also carries is removed and put back). */
  readonly removedTenants: readonly string[];
}

/**
 * The compiled snapshot the request path reads. Node addresses and pool keys are derived on
 * demand from the compile index rather than built with every snapshot: at 20,000 nodes
 * building them cost more than compiling a one-route delta, and only a pool clean-up reads
 * them, right after the swap.
 */
export class FrozenCompiledSnapshot implements CompiledSnapshot {
  readonly #table: RouteTable;
  /** Undefined once handed to the snapshot of the next delta. */
  #index: CompileIndex | undefined;
  #addresses: ReadonlySet<string> | undefined;
  #poolKeys: ReadonlyMap<string, ReadonlySet<string>> | undefined;
  readonly routeCount: number;

  constructor(
    readonly version: number,
    readonly createdAtMs: number,
    /** Immutable, and derived by the next delta without a copy of every upstream. */
    readonly upstreams: LayeredMap<string, CompiledUpstream>,
    table: RouteTable,
    index: CompileIndex,
    /** The wire snapshot by name; the next delta derives its own from it. */
    readonly wire: WireSource,
    /** The tenants' API keys, which route auth policies look up (CompiledSnapshot.tenantKeys). */
    readonly tenantKeys: TenantKeys,
    /** Set when compiled from a delta: what it changed, for work in proportion after the swap. */
    readonly changes: DeltaChanges | undefined,
  ) {
    this.#table = table;
    this.#index = index;
    this.routeCount = index.routes.size;
    Object.freeze(this);
  }

  /** The wire snapshot this was compiled from (put together on first read: WireSource). */
  get source(): Snapshot {
    return this.wire.snapshot();
  }

  /** The route table, for the next delta to update. */
  table(): RouteTable {
    return this.#table;
  }

  /** The compile index, still owned by this snapshot; undefined once handed over. */
  index(): CompileIndex | undefined {
    return this.#index;
  }

  /**
   * Gives the compile index to the snapshot of the next delta, which has updated it in place;
   * this snapshot then takes no more deltas (only the one served does).
   */
  handOver(): CompileIndex {
    const index = this.#owned();
    this.#index = undefined;
    return index;
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
    this.#addresses ??= frozenSet(this.#owned().upstreamsByAddress.keys());
    return this.#addresses;
  }

  poolKeysOf(address: string): ReadonlySet<string> | undefined {
    const index = this.#owned();
    let keys: Set<string> | undefined;
    for (const upstream of index.upstreamsByAddress.get(address) ?? []) {
      for (const name of index.routesByUpstream.get(upstream) ?? []) {
        for (const target of index.routes.get(name)?.targets ?? []) {
          if (target.upstream.name !== upstream) continue;
          keys ??= new Set();
          keys.add(target.poolSettings.key);
          // The pool WebSocket handshakes to an http2 upstream use is kept as long.
          if (target.poolSettings.http1 !== undefined) keys.add(target.poolSettings.http1.key);
        }
      }
    }
    return keys;
  }

  poolKeys(): ReadonlyMap<string, ReadonlySet<string>> {
    if (this.#poolKeys === undefined) {
      const all = new Map<string, ReadonlySet<string>>();
      for (const address of this.#owned().upstreamsByAddress.keys()) {
        const keys = this.poolKeysOf(address);
        if (keys !== undefined) all.set(address, frozenSet(keys));
      }
      this.#poolKeys = frozenMap(all);
    }
    return this.#poolKeys;
  }

  #owned(): CompileIndex {
    if (this.#index === undefined) {
      throw new Error(`snapshot ${this.version} was superseded by a delta; ask the newest one`);
    }
    return this.#index;
  }
}
