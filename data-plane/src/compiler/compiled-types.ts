import type { IncomingHttpHeaders } from "node:http";
import type {
  BreakerPolicy,
  ConfigProblem,
  RetryAfterScope,
  Route,
  Snapshot,
  Upstream,
} from "@clawgate/proto";
import type { SmoothWrrPicker } from "../balancer/smooth-wrr.js";
import type { PolicyChain } from "../policy/policy.js";
import type { TenantKeys } from "../policy/tenant-keys.js";
import type { UpstreamTlsOptions } from "../upstream/upstream-tls.js";

/** One backend instance, as the proxy dials it. */
export interface CompiledNode {
  /** host:port exactly as configured; the key of pools, breakers and health state. */
  readonly address: string;
  /** Host part without brackets ("::1" for "[::1]:80"). */
  readonly host: string;
  readonly port: number;
  readonly weight: number;
  /** "config" or "registry". */
  readonly source: string;
  /** Name of the upstream the node belongs to. */
  readonly upstream: string;
  /** "http://host:port" ("https://" with TLS), the undici origin for this node. */
  readonly origin: string;
}

export interface CompiledUpstream {
  readonly name: string;
  readonly nodes: readonly CompiledNode[];
  /** Smooth WRR over the nodes; one per upstream per snapshot. */
  readonly picker: SmoothWrrPicker<CompiledNode>;
  /** Breaker policy name; "" when none. */
  readonly breaker: string;
  /** The policy `breaker` names; undefined when none (the breaker runs on the shared defaults). */
  readonly breakerPolicy: BreakerPolicy | undefined;
  /** 0 means no limit. */
  readonly maxConnectionsPerNode: number;
  /** Idle time after which a keep-alive connection to a node closes; 1..600000. */
  readonly keepAliveTimeoutMs: number;
  /** How the nodes are dialled over TLS (files already read); undefined for plaintext. */
  readonly tls: UpstreamTlsOptions | undefined;
  /** Replace the client's Host with `hostName` (hostRewrite, or tls.serverName set). */
  readonly hostRewrite: boolean;
  /** Offer HTTP/2 to the nodes (over TLS, by ALPN). */
  readonly http2: boolean;
  /** tls.serverName; undefined lets undici write each node's own host[:port]. */
  readonly hostName: string | undefined;
  /** What a 429/503 Retry-After cools down: the node, the whole upstream, or the tenant. */
  readonly retryAfterScope: RetryAfterScope;
  readonly source: Upstream;
}

/**
 * How a pool to a node must be built for a given route and upstream. Connections are shared
 * by every route that reaches a node, so the connect timeout, the connection limit and the
 * keep-alive time are properties of the pool, not of a request: see PoolRegistry.
 */
export interface PoolSettings {
  /** Identifies the settings inside the registry: "connectMs/connections/keepAliveMs". */
  readonly key: string;
  /** 0 disables the connect timeout (a zero on the wire means off). */
  readonly connectTimeoutMs: number;
  /** 0 means no limit. */
  readonly connections: number;
  /** Idle keep-alive connections close after this long (the upstream's keepAliveTimeoutMs). */
  readonly keepAliveTimeoutMs: number;
  /** TLS to the node (the upstream's); undefined for plaintext. Part of `key` by its id. */
  readonly tls?: UpstreamTlsOptions | undefined;
  /** Offer HTTP/2 in ALPN (the upstream's `http2`); part of `key`. */
  readonly http2?: boolean;
  /** With http2: the same settings offering HTTP/1.1 only, for WebSocket handshakes. */
  readonly http1?: PoolSettings;
}

/** One upstream a route can send to, with its share of a split. */
export interface CompiledTarget {
  readonly upstream: CompiledUpstream;
  /** Split weight; 1 for a single-upstream route. */
  readonly weight: number;
  readonly poolSettings: PoolSettings;
}

export interface CompiledRoute {
  readonly name: string;
  readonly priority: number;
  /** Lower-case hosts; "*.example.com" is a suffix wildcard; empty means any host. */
  readonly hosts: readonly string[];
  /** "exact" when match.path is set, else "prefix". */
  readonly pathKind: "exact" | "prefix";
  /** match.path or match.pathPrefix. */
  readonly pathValue: string;
  /** Upper-case methods; undefined means any method. */
  readonly methods: ReadonlySet<string> | undefined;
  /** Lower-case names with the exact value each must have. */
  readonly headers: readonly { readonly name: string; readonly value: string }[];
  readonly targets: readonly CompiledTarget[];
  /** Picks the target: the only one, or smooth WRR over split weights. */
  pickTarget(): CompiledTarget | undefined;
  /** rewrite.pathPrefix, or undefined when the path is forwarded as it came. */
  readonly rewritePathPrefix: string | undefined;
  /** rewrite.host, or undefined to keep the client's Host. */
  readonly rewriteHost: string | undefined;
  /** Per-request undici timeouts; 0 is off. */
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly totalTimeoutMs: number;
  /** timeouts.streamIdleMs: a stream's longest silence; 0 is off (also a CP that sends none). */
  readonly streamIdleMs: number;
  /** Retries after the first attempt (retry.attempts); the shared default without a policy. */
  readonly retryAttempts: number;
  /** retry.on; the shared DEFAULT_RETRY_ON when the snapshot carries no policy. */
  readonly retryOn: readonly string[];
  /** fallback.staleIfErrorSeconds in ms; 0 is off. */
  readonly staleIfErrorMs: number;
  /** The route's policies in chain order (policy-list.ts); empty: the stage is skipped. */
  readonly policies: PolicyChain;
  /** maxBodyBytes: a chunked body is cut with 413 past it; 0 is no limit. */
  readonly maxBodyBytes: number;
  /** usage.injectStreamUsage: streaming JSON requests get include_usage (stream-usage.ts). */
  readonly injectStreamUsage: boolean;
  readonly source: Route;
}

/** A snapshot compiled for the request path. Frozen: a request can hold it for its whole life. */
export interface CompiledSnapshot {
  readonly version: number;
  readonly createdAtMs: number;
  readonly routeCount: number;
  readonly upstreams: ReadonlyMap<string, CompiledUpstream>;
  /**
   * The tenants' API keys, one index per snapshot: a request's auth policy looks the key up
   * here, through the snapshot the request was routed by, so a tenant change swaps this index
   * and recompiles no route.
   */
  readonly tenantKeys: TenantKeys;
  /**
   * The route for a request, or undefined. `host` is the raw Host header (port and case are
   * ignored); `path` may carry a query string, which is not matched.
   */
  match(
    method: string,
    host: string,
    path: string,
    headers: IncomingHttpHeaders,
  ): CompiledRoute | undefined;
  /** Every node address of every upstream. */
  nodeAddresses(): ReadonlySet<string>;
  /**
   * The pool settings keys each node address is reached with by this snapshot's routes;
   * PoolRegistry.retain() takes it and closes every other pool.
   */
  poolKeys(): ReadonlyMap<string, ReadonlySet<string>>;
  /** The pool settings keys of one node address (poolKeys().get(address)), found in O(routes of its upstreams). */
  poolKeysOf(address: string): ReadonlySet<string> | undefined;
  readonly source: Snapshot;
}

/**
 * A compiled snapshot, or why the snapshot is refused: the shared validation's problems and
 * the one line made of them that goes into the NACK.
 */
export type CompileResult =
  | { ok: true; value: CompiledSnapshot }
  | { ok: false; reason: string; problems: ConfigProblem[] };
