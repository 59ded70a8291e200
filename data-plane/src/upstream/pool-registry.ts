import { Pool } from "undici";
import type { PoolSettings } from "../compiler/compiled-types.js";

export interface PoolRegistryOptions {
  /** Idle keep-alive connections close after this long; default 4000 ms (undici's default). */
  keepAliveTimeoutMs?: number;
  /** Connect timeout for get() calls without settings; default 1000 ms (the route default). */
  connectTimeoutMs?: number;
  /** Builds a pool; tests inject one. Default: `new Pool(origin, options)`. */
  factory?: (origin: string, options: Pool.Options) => Pool;
}

/**
 * Keep-alive connection pools to upstream nodes, created lazily and kept across snapshots
 * (a reload must not drop warm connections).
 *
 * Keyed by node address and then by pool settings. A connect timeout and a connection limit
 * can only be set per pool, because a connection is shared by every request that reaches the
 * node; so a route's `timeouts.connectMs` selects (or creates) the pool built with it. Routes
 * normally carry the control plane's default, so this is one pool per node; two routes with
 * different connect timeouts to the same node get one pool each.
 */
export class PoolRegistry {
  readonly #pools = new Map<string, Map<string, Pool>>();
  readonly #keepAliveTimeoutMs: number;
  readonly #defaultSettings: PoolSettings;
  readonly #factory: (origin: string, options: Pool.Options) => Pool;
  #closed = false;

  constructor(options: PoolRegistryOptions = {}) {
    this.#keepAliveTimeoutMs = options.keepAliveTimeoutMs ?? 4000;
    const connectTimeoutMs = options.connectTimeoutMs ?? 1000;
    this.#defaultSettings = Object.freeze({
      key: `${connectTimeoutMs}/0`,
      connectTimeoutMs,
      connections: 0,
    });
    this.#factory = options.factory ?? ((origin, poolOptions) => new Pool(origin, poolOptions));
  }

  /** The pool for a node address ("host:port"), created on first use. Throws once closed. */
  get(address: string, settings: PoolSettings = this.#defaultSettings): Pool {
    let bySettings = this.#pools.get(address);
    if (bySettings !== undefined) {
      const pool = bySettings.get(settings.key);
      if (pool !== undefined) return pool;
    }
    if (this.#closed) throw new Error("pool registry is closed");
    if (bySettings === undefined) {
      bySettings = new Map();
      this.#pools.set(address, bySettings);
    }
    const pool = this.#factory(`http://${address}`, {
      // 0 on the wire means off; undici reads null as "no limit".
      connections: settings.connections > 0 ? settings.connections : null,
      connectTimeout: settings.connectTimeoutMs,
      keepAliveTimeout: this.#keepAliveTimeoutMs,
      pipelining: 1,
    });
    bySettings.set(settings.key, pool);
    return pool;
  }

  /**
   * Closes the pools of nodes that are not in `addresses` (the applied snapshot's nodes).
   * close() lets requests in flight finish; a request still holding the previous snapshot
   * that reaches a removed node afterwards gets a fresh pool, closed by the next retain().
   */
  retain(addresses: ReadonlySet<string>): void {
    for (const [address, bySettings] of this.#pools) {
      if (addresses.has(address)) continue;
      this.#pools.delete(address);
      for (const pool of bySettings.values()) void pool.close().catch(ignore);
    }
  }

  /** Closes every pool, letting requests in flight finish. */
  async close(): Promise<void> {
    this.#closed = true;
    const closing: Promise<void>[] = [];
    for (const bySettings of this.#pools.values()) {
      for (const pool of bySettings.values()) closing.push(pool.close().catch(ignore));
    }
    this.#pools.clear();
    await Promise.all(closing);
  }

  /** Addresses that currently have a pool. */
  addresses(): string[] {
    return [...this.#pools.keys()];
  }
}

function ignore(): void {}
