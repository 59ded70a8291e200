import type { Pool as UndiciPool } from "undici";
import type { PoolSettings } from "../compiler/compiled-types.js";
import { DnsRefresh } from "./dns-refresh.js";
import { createNodeResolver, type NodeResolver } from "./node-resolver.js";
import { tlsConnector } from "./tls-connector.js";
import { Pool } from "./undici-parts.js";

/** Per node address, the settings keys to keep; a ReadonlyMap fits, so does a lookup. */
export interface PoolKeyLookup {
  get(address: string): ReadonlySet<string> | undefined;
}

export interface PoolRegistryOptions {
  /** Keep-alive time for get() calls without settings; default 4000 ms (undici's default). */
  keepAliveTimeoutMs?: number;
  /** Connect timeout for get() calls without settings; default 1000 ms (the route default). */
  connectTimeoutMs?: number;
  /** Builds a pool; tests inject one. Default: `new Pool(origin, options)`. */
  factory?: (origin: string, options: UndiciPool.Options) => UndiciPool;
  /** How node names are resolved (the dnsServers setting); default the system resolver. */
  resolver?: NodeResolver;
  /**
   * How often the names of nodes given as DNS names are resolved again, so busy keep-alive
   * connections follow a changed record (the dnsRefreshMs setting); default 5000, 0 is off.
   */
  dnsRefreshMs?: number;
  /** Told when a node's name resolves to other addresses and its pools are retired. */
  onDnsChange?: (addresses: readonly string[]) => void;
}

/**
 * Keep-alive connection pools to upstream nodes, created lazily and kept across snapshots
 * (a reload must not drop warm connections).
 *
 * Keyed by node address and then by pool settings. A connect timeout, a connection limit and a
 * keep-alive time can only be set per pool, because a connection is shared by every request
 * that reaches the node; so a route's `timeouts.connectMs` and its upstream's
 * `keepAliveTimeoutMs` select (or create) the pool built with them. Routes normally carry the
 * control plane's defaults, so this is one pool per node; two routes with different connect
 * timeouts to the same node get one pool each. A snapshot that changes a setting makes new
 * requests use a new pool; retain() closes the old one once its requests are done.
 *
 * A node given as a DNS name is resolved by each new connection; its pools are retired the
 * same way when a periodic re-resolution (DnsRefresh) finds another address set, so even a
 * connection kept busy forever moves to the new address once its requests in flight are done.
 */
export class PoolRegistry {
  readonly #pools = new Map<string, Map<string, UndiciPool>>();
  readonly #defaultSettings: PoolSettings;
  readonly #factory: (origin: string, options: UndiciPool.Options) => UndiciPool;
  readonly #lookup: NodeResolver["lookup"];
  readonly #dns: DnsRefresh;
  #closed = false;

  constructor(options: PoolRegistryOptions = {}) {
    const keepAliveTimeoutMs = options.keepAliveTimeoutMs ?? 4000;
    const connectTimeoutMs = options.connectTimeoutMs ?? 1000;
    this.#defaultSettings = Object.freeze({
      key: `${connectTimeoutMs}/0/${keepAliveTimeoutMs}`,
      connectTimeoutMs,
      connections: 0,
      keepAliveTimeoutMs,
    });
    this.#factory = options.factory ?? ((origin, poolOptions) => new Pool(origin, poolOptions));
    const resolver = options.resolver ?? createNodeResolver();
    this.#lookup = resolver.lookup;
    this.#dns = new DnsRefresh({
      resolver,
      refreshMs: options.dnsRefreshMs ?? DEFAULT_DNS_REFRESH_MS,
      changed: (addresses) => {
        for (const address of addresses) this.#retire(address);
        options.onDnsChange?.(addresses);
      },
    });
  }

  /** The pool for a node address ("host:port"), created on first use. Throws once closed. */
  get(address: string, settings: PoolSettings = this.#defaultSettings): UndiciPool {
    let bySettings = this.#pools.get(address);
    if (bySettings !== undefined) {
      const pool = bySettings.get(settings.key);
      if (pool !== undefined) return pool;
    }
    if (this.#closed) throw new Error("pool registry is closed");
    if (bySettings === undefined) {
      bySettings = new Map();
      this.#pools.set(address, bySettings);
      this.#dns.watch(address);
    }
    const tls = settings.tls;
    const lookup = this.#lookup;
    const pool = this.#factory(`${tls === undefined ? "http" : "https"}://${address}`, {
      // 0 on the wire means off; undici reads null as "no limit".
      connections: settings.connections > 0 ? settings.connections : null,
      connectTimeout: settings.connectTimeoutMs,
      keepAliveTimeout: settings.keepAliveTimeoutMs,
      // A node's "Keep-Alive: timeout=N" may shorten the idle time, never lengthen it past the
      // operator's setting (undici otherwise accepts up to 10 minutes).
      keepAliveMaxTimeout: settings.keepAliveTimeoutMs,
      pipelining: 1,
      ...(tls === undefined
        ? lookup === undefined
          ? {}
          : { connect: { lookup } }
        : {
            connect: tlsConnector(tls, settings.connectTimeoutMs, settings.http2 === true, lookup),
          }),
      // HTTP/2 when the node picks it in ALPN; then one connection carries many requests.
      ...(settings.http2 === true ? { allowH2: true } : {}),
    });
    bySettings.set(settings.key, pool);
    return pool;
  }

  /**
   * Closes every pool except those `keys` names: per node address, the settings keys the
   * applied snapshot's routes reach it with (CompiledSnapshot.poolKeys()). So a removed node
   * loses its pools, and a node whose settings changed loses the pool built with the old ones.
   * close() lets requests in flight finish; a request still holding the previous snapshot
   * that asks for a closed pool afterwards gets a fresh one, closed by the next retain().
   * With `only`, the pools of those addresses alone are checked (the nodes a change touched).
   */
  retain(keys: PoolKeyLookup, only?: ReadonlySet<string>): void {
    if (only !== undefined && only.size < this.#pools.size) {
      // A change that touched a few nodes checks their pools only.
      for (const address of only) this.#retainAddress(address, keys);
      return;
    }
    for (const address of [...this.#pools.keys()]) {
      if (only === undefined || only.has(address)) this.#retainAddress(address, keys);
    }
  }

  #retainAddress(address: string, keys: PoolKeyLookup): void {
    const bySettings = this.#pools.get(address);
    if (bySettings === undefined) return;
    const kept = keys.get(address);
    for (const [key, pool] of bySettings) {
      if (kept?.has(key)) continue;
      bySettings.delete(key);
      void pool.close().catch(ignore);
    }
    if (bySettings.size === 0) {
      this.#pools.delete(address);
      this.#dns.unwatch(address);
    }
  }

  /** Closes every pool of an address (requests in flight finish); the next get() makes one. */
  #retire(address: string): void {
    const bySettings = this.#pools.get(address);
    if (bySettings === undefined) return;
    this.#pools.delete(address);
    this.#dns.unwatch(address);
    for (const pool of bySettings.values()) void pool.close().catch(ignore);
  }

  /** Closes every pool, letting requests in flight finish. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#dns.close();
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

/** Envoy's dns_refresh_rate default: a changed record is followed within seconds. */
export const DEFAULT_DNS_REFRESH_MS = 5_000;
