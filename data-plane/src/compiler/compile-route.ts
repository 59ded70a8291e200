import {
  DEFAULT_RETRY_ATTEMPTS,
  DEFAULT_RETRY_ON,
  DEFAULT_ROUTE_TIMEOUTS,
  DEFAULT_STALE_IF_ERROR_SECONDS,
  normalizePath,
  type Route,
  type Tenant,
} from "@clawgate/proto";
import { SmoothWrrPicker } from "../balancer/smooth-wrr.js";
import { compilePolicies } from "../policy/compile-policies.js";
import type {
  CompiledRoute,
  CompiledTarget,
  CompiledUpstream,
  PoolSettings,
} from "./compiled-types.js";

/** Shares one frozen PoolSettings object per distinct (connect timeout, limit, keep-alive). */
export type PoolSettingsCache = Map<string, PoolSettings>;

const NO_HEADERS: readonly { readonly name: string; readonly value: string }[] = Object.freeze([]);

/**
 * Compiles one route of a snapshot that validateSnapshot passed: nothing here refuses. Policies
 * an older control plane may leave out take the shared defaults, never a literal here.
 */
export function compileRoute(
  route: Route,
  upstreams: ReadonlyMap<string, CompiledUpstream>,
  poolSettings: PoolSettingsCache,
  tenants: ReadonlyMap<string, Tenant>,
): CompiledRoute {
  const name = route.name;
  const match = route.match!;
  const pathKind = match.path !== "" ? "exact" : "prefix";
  const rawPath = match.path !== "" ? match.path : match.pathPrefix;
  // Requests are matched normalized, so the route's own path must be too: "/api//v1" or
  // "/%7Euser" would otherwise never match.
  const pathValue = normalizePath(rawPath) as string;

  const hosts: string[] = [];
  for (const raw of match.hosts) {
    const host = raw.toLowerCase();
    if (!hosts.includes(host)) hosts.push(host);
  }

  let methods: Set<string> | undefined;
  for (const method of match.methods) {
    methods ??= new Set();
    methods.add(method);
  }

  const headers = match.headers.map((header) =>
    Object.freeze({ name: header.name.toLowerCase(), value: header.value }),
  );

  const timeouts = route.timeouts ?? DEFAULT_ROUTE_TIMEOUTS;
  const connectTimeoutMs = timeouts.connectMs;
  const list = compileTargets(route, upstreams, poolSettings, connectTimeoutMs);
  const rewritePathPrefix = route.rewrite?.pathPrefix ?? "";
  const rewriteHost = route.rewrite?.host ?? "";
  const only = list[0];
  let pickTarget: () => CompiledTarget | undefined;
  if (list.length === 1) {
    pickTarget = () => only;
  } else {
    const picker = new SmoothWrrPicker(list);
    pickTarget = () => picker.pick();
  }

  return Object.freeze({
    name,
    priority: route.priority,
    hosts: Object.freeze(hosts),
    pathKind,
    pathValue,
    methods: methods === undefined ? undefined : Object.freeze(methods),
    // Routes without header conditions share one empty list, which the matcher reads on every
    // candidate: one object that stays in the CPU cache rather than one per route.
    headers: headers.length === 0 ? NO_HEADERS : Object.freeze(headers),
    targets: list,
    pickTarget,
    rewritePathPrefix: rewritePathPrefix === "" ? undefined : rewritePathPrefix,
    rewriteHost: rewriteHost === "" ? undefined : rewriteHost,
    headersTimeoutMs: timeouts.headersMs,
    bodyTimeoutMs: timeouts.bodyMs,
    connectTimeoutMs,
    totalTimeoutMs: timeouts.totalMs,
    streamIdleMs: timeouts.streamIdleMs,
    // No policy on the wire (a hand-built snapshot) gets the shared defaults; a policy that
    // is present is taken as written, zero attempts included.
    retryAttempts: route.retry === undefined ? DEFAULT_RETRY_ATTEMPTS : route.retry.attempts,
    retryOn: Object.freeze(route.retry === undefined ? [...DEFAULT_RETRY_ON] : [...route.retry.on]),
    staleIfErrorMs: (route.fallback?.staleIfErrorSeconds ?? DEFAULT_STALE_IF_ERROR_SECONDS) * 1000,
    policies: compilePolicies(route, tenants),
    maxBodyBytes: Number(route.maxBodyBytes),
    injectStreamUsage: route.usage?.injectStreamUsage ?? false,
    source: route,
  });
}

function compileTargets(
  route: Route,
  upstreams: ReadonlyMap<string, CompiledUpstream>,
  cache: PoolSettingsCache,
  connectTimeoutMs: number,
): readonly CompiledTarget[] {
  const parts = route.upstream !== "" ? [{ upstream: route.upstream, weight: 1 }] : route.split;
  const targets = parts.map((part) => {
    const upstream = upstreams.get(part.upstream);
    if (upstream === undefined) throw new Error(`unvalidated upstream in route ${route.name}`);
    return target(upstream, part.weight, settingsFor(cache, connectTimeoutMs, upstream));
  });
  return Object.freeze(targets);
}

function target(upstream: CompiledUpstream, weight: number, poolSettings: PoolSettings) {
  return Object.freeze({ upstream, weight, poolSettings });
}

function settingsFor(
  cache: PoolSettingsCache,
  connectTimeoutMs: number,
  upstream: CompiledUpstream,
): PoolSettings {
  const connections = upstream.maxConnectionsPerNode;
  const keepAliveTimeoutMs = upstream.keepAliveTimeoutMs;
  const tls = upstream.tls;
  // TLS settings (and the files' contents) are part of the key: a renewed client certificate
  // makes new connections use a new pool, while requests in flight finish on the old one.
  const base = `${connectTimeoutMs}/${connections}/${keepAliveTimeoutMs}`;
  const http2 = upstream.http2;
  const key = tls === undefined ? base : `${base}/tls-${tls.id}${http2 ? "/h2" : ""}`;
  let settings = cache.get(key);
  if (settings === undefined) {
    settings = Object.freeze({
      key,
      connectTimeoutMs,
      connections,
      keepAliveTimeoutMs,
      tls,
      http2,
      // undici cannot send a WebSocket handshake on an HTTP/2 connection (nor an extended
      // CONNECT), so handshakes to an http2 upstream use the same TLS settings offering
      // HTTP/1.1 only, the pool an http2: false upstream with these files would have.
      ...(http2
        ? { http1: settingsFor(cache, connectTimeoutMs, { ...upstream, http2: false }) }
        : {}),
    });
    cache.set(key, settings);
  }
  return settings;
}

/** The snapshot's tenants by name, as route policies are compiled with them. */
export function tenantMap(tenants: readonly Tenant[]): ReadonlyMap<string, Tenant> {
  return new Map(tenants.map((tenant) => [tenant.name, tenant]));
}
