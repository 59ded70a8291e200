import {
  type BreakerDocument as Breaker,
  type BreakerPolicy,
  BreakerPolicySchema,
  create,
  DEFAULT_BREAKER,
  DEFAULT_BREAKER_NAME,
  type ResourceKind,
  type Route,
  type RouteDocument,
  RouteSchema,
  type Snapshot,
  SnapshotSchema,
  type Tenant,
  type TenantDocument,
  TenantSchema,
  type Upstream,
  type UpstreamDocument,
  UpstreamSchema,
} from "@clawgate/proto";
import { mergeNodes } from "../registry/merge-nodes.js";
import type { RegisteredNode, RegistryNodes } from "../registry/registered-node.js";
import type { ConfigState, StoredResource } from "../resources/config-state.js";
import { toUpstreamTls } from "./to-upstream-tls.js";

export interface SnapshotStamp {
  /** Store revision the state was read at. */
  version: number;
  /** Names this version on the wire so Acks and Nacks can be matched to it. */
  nonce: string;
  /** Unix milliseconds the snapshot was built. */
  createdAtMs: number;
}

const NO_REGISTERED_NODES: readonly RegisteredNode[] = [];

/**
 * Translates a (consistent, defaulted) config state into the wire snapshot. Every list is
 * sorted by name so one state always yields the same bytes, and every optional document field
 * is spelt out, because on the wire a zero means zero, never "use the default".
 *
 * `registry` adds self-registered nodes to their upstreams (see mergeNodes: the document wins
 * an address clash). Registrations for an upstream that does not exist are left out: they are
 * orphans of a deleted upstream, and their leases run out once the nodes' renewals get 404.
 */
export function toSnapshot(
  state: ConfigState,
  stamp: SnapshotStamp,
  registry: RegistryNodes = new Map(),
): Snapshot {
  const breakers = sortedByName(state.breakers);
  if (!state.breakers.has(DEFAULT_BREAKER_NAME)) {
    breakers.push({ name: DEFAULT_BREAKER_NAME, document: DEFAULT_BREAKER, revision: 0 });
    breakers.sort(byName);
  }
  return create(SnapshotSchema, {
    version: BigInt(stamp.version),
    nonce: stamp.nonce,
    routes: sortedByName(state.routes).map(({ name, document }) => toRoute(name, document)),
    upstreams: sortedByName(state.upstreams).map(({ name, document }) =>
      toUpstream(name, document, registry.get(name) ?? NO_REGISTERED_NODES),
    ),
    breakers: breakers.map(({ name, document }) => toBreaker(name, document)),
    tenants: sortedByName(state.tenants).map(({ name, document }) => toTenant(name, document)),
    createdAtMs: BigInt(stamp.createdAtMs),
  });
}

export function toUpstream(
  name: string,
  upstream: UpstreamDocument,
  registered: readonly RegisteredNode[],
): Upstream {
  const check = upstream.healthCheck;
  return create(UpstreamSchema, {
    name,
    nodes: mergeNodes(upstream.nodes, registered).nodes.map(({ address, weight, source }) => ({
      address,
      weight,
      source,
    })),
    healthCheck: {
      intervalMs: check.intervalMs,
      timeoutMs: check.timeoutMs,
      unhealthyThreshold: check.unhealthyThreshold,
      healthyThreshold: check.healthyThreshold,
      // null in the document means TCP-only probing; the wire spells that as "".
      path: check.path ?? "",
      expectStatus: check.expectStatus ?? "",
    },
    breaker: upstream.breaker,
    // remediation stays here: the control plane runs it, and its webhook URL may hold secrets.
    maxConnectionsPerNode: upstream.maxConnectionsPerNode,
    keepAliveTimeoutMs: upstream.keepAliveTimeoutMs,
    tls: toUpstreamTls(upstream.tls),
    hostRewrite: upstream.hostRewrite,
    retryAfterScope: upstream.retryAfterScope,
    http2: upstream.http2,
  });
}

export function toRoute(name: string, route: RouteDocument): Route {
  const headers = Object.entries(route.match.headers)
    .map(([header, value]) => ({ name: header.toLowerCase(), value }))
    .sort((a, b) => compare(a.name, b.name));
  return create(RouteSchema, {
    name,
    match: {
      hosts: route.match.hosts,
      path: route.match.path ?? "",
      pathPrefix: route.match.pathPrefix ?? "",
      methods: route.match.methods,
      headers,
    },
    priority: route.priority,
    upstream: route.upstream ?? "",
    split: route.split ?? [],
    rewrite:
      route.rewrite === undefined
        ? undefined
        : { pathPrefix: route.rewrite.pathPrefix ?? "", host: route.rewrite.host ?? "" },
    retry: { attempts: route.retry.attempts, on: route.retry.on },
    timeouts: {
      connectMs: route.timeouts.connectMs,
      headersMs: route.timeouts.headersMs,
      bodyMs: route.timeouts.bodyMs,
      totalMs: route.timeouts.totalMs,
      streamIdleMs: route.timeouts.streamIdleMs,
    },
    fallback: { staleIfErrorSeconds: route.fallback.staleIfErrorSeconds },
    auth: route.auth,
    cors: route.cors,
    ipAllow: route.ipAllow,
    ipDeny: route.ipDeny,
    requestHeaders: route.requestHeaders,
    responseHeaders: route.responseHeaders,
    maxBodyBytes: BigInt(route.maxBodyBytes),
    usage: route.usage,
  });
}

export function toBreaker(name: string, breaker: Breaker): BreakerPolicy {
  return create(BreakerPolicySchema, {
    name,
    windowMs: breaker.windowMs,
    minRequests: breaker.minRequests,
    failureRatio: breaker.failureRatio,
    consecutiveFailures: breaker.consecutiveFailures,
    cooldownMs: breaker.cooldownMs,
    cooldownMultiplier: breaker.cooldownMultiplier,
    maxCooldownMs: breaker.maxCooldownMs,
    halfOpenMaxInFlight: breaker.halfOpenMaxInFlight,
    halfOpenSuccesses: breaker.halfOpenSuccesses,
    fleetProbe: breaker.fleetProbe,
  });
}

export function toTenant(name: string, tenant: TenantDocument): Tenant {
  return create(TenantSchema, {
    name,
    apiKeySha256: tenant.apiKeySha256,
    requestsPerMinute: tenant.requestsPerMinute,
    tokensPerMinute: BigInt(tenant.tokensPerMinute),
    tokensPerDay: BigInt(tenant.tokensPerDay),
    allowedRoutes: tenant.allowedRoutes,
  });
}

function sortedByName<K extends ResourceKind>(
  resources: Map<string, StoredResource<K>>,
): StoredResource<K>[] {
  return [...resources.values()].sort(byName);
}

function byName(a: { name: string }, b: { name: string }): number {
  return compare(a.name, b.name);
}

// Code-unit order, not localeCompare: the order must not depend on the host's locale.
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
