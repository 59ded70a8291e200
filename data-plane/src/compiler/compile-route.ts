import type { Route } from "@clawgate/proto";
import { SmoothWrrPicker } from "../balancer/smooth-wrr.js";
import { type Compiled, fail, RESOURCE_NAME } from "./compile-upstream.js";
import type {
  CompiledRoute,
  CompiledTarget,
  CompiledUpstream,
  PoolSettings,
} from "./compiled-types.js";
import { normalizePath } from "./normalize-path.js";
import { requestPathProblem } from "./origin-form.js";

// Compile-time only; nothing here runs per request.
const HOST = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/;
const HOST_HEADER = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/;
const METHOD = /^[A-Z][A-Z0-9_-]*$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;
const PATH = /^\/[^\s?#]*$/;
const MAX_SPLIT_WEIGHT = 1_000_000;

/**
 * True for a path or prefix the route table can match: starts with "/", no space, "?" or "#",
 * and normalizePath accepts it (a route on "/a%2Fb" could never match a request, which is
 * refused with the same reason).
 */
export function isRoutePath(value: string): boolean {
  return PATH.test(value) && typeof normalizePath(value) === "string";
}

export const ROUTE_PATH_RULE =
  'must start with "/", hold no space, "?", "#", "\\", control character, %2F, %5C or ' +
  'invalid %-escape, and no ".;" or "..;" segment';

/** True for a match host: a host name (any case) or "*.suffix", without port. */
export function isRouteHost(value: string): boolean {
  const host = value.toLowerCase();
  return HOST.test(host.startsWith("*.") ? host.slice(2) : host);
}

/** True for a header name (any case) a route may match on. */
export function isHeaderName(value: string): boolean {
  return HEADER_NAME.test(value.toLowerCase());
}

/** True for a Host header value a rewrite may send: host[:port] or [v6][:port]. */
export function isHostHeader(value: string): boolean {
  return HOST_HEADER.test(value);
}
/** Retries when the snapshot carries no retry policy; the control plane's default too. */
export const DEFAULT_RETRY_ATTEMPTS = 2;
/**
 * `retry.on` when the snapshot carries no policy; the control plane's default too (it imports
 * this). Connect failures never reached the upstream, so any method may go again. A reset
 * (a node killed or restarted mid-request) is retried like nginx's `proxy_next_upstream error`:
 * retryDecision still lets only idempotent methods go again once the request reached the node,
 * so a POST that may have been acted on is never sent twice.
 */
export const DEFAULT_RETRY_ON: readonly ("connect-failure" | "reset")[] = Object.freeze([
  "connect-failure",
  "reset",
]);

/** Shares one frozen PoolSettings object per distinct (connect timeout, limit, keep-alive). */
export type PoolSettingsCache = Map<string, PoolSettings>;

export function compileRoute(
  route: Route,
  index: number,
  upstreams: ReadonlyMap<string, CompiledUpstream>,
  poolSettings: PoolSettingsCache,
): Compiled<CompiledRoute> {
  const name = route.name;
  if (name === "") return fail(`routes[${index}]: name is empty`);
  if (!RESOURCE_NAME.test(name)) return fail(`route "${name}": name is not a valid name`);
  const where = `route "${name}"`;
  const match = route.match;
  if (match === undefined) return fail(`${where}: match is missing`);

  if (match.path !== "" && match.pathPrefix !== "") {
    return fail(`${where}: match.path and match.pathPrefix are both set; set one`);
  }
  if (match.path === "" && match.pathPrefix === "") {
    return fail(`${where}: match.path or match.pathPrefix must be set`);
  }
  const pathKind = match.path !== "" ? "exact" : "prefix";
  const rawPath = match.path !== "" ? match.path : match.pathPrefix;
  const pathField = pathKind === "exact" ? "match.path" : "match.pathPrefix";
  if (!isRoutePath(rawPath)) return fail(`${where}: ${pathField} ${ROUTE_PATH_RULE}`);
  // Requests are matched normalized, so the route's own path must be too: "/api//v1" or
  // "/%7Euser" would otherwise never match.
  const pathValue = normalizePath(rawPath) as string;

  const hosts: string[] = [];
  for (const [i, raw] of match.hosts.entries()) {
    const host = raw.toLowerCase();
    if (!isRouteHost(host)) {
      return fail(`${where}: match.hosts[${i}] must be a host name (or *.suffix) without port`);
    }
    if (!hosts.includes(host)) hosts.push(host);
  }

  let methods: Set<string> | undefined;
  for (const [i, method] of match.methods.entries()) {
    if (!METHOD.test(method)) return fail(`${where}: match.methods[${i}] must be upper case`);
    methods ??= new Set();
    methods.add(method);
  }

  const headers: { name: string; value: string }[] = [];
  for (const [i, header] of match.headers.entries()) {
    const headerName = header.name.toLowerCase();
    if (!isHeaderName(headerName)) {
      return fail(`${where}: match.headers[${i}].name is not a header name`);
    }
    headers.push(Object.freeze({ name: headerName, value: header.value }));
  }

  const timeouts = route.timeouts;
  const connectTimeoutMs = timeouts?.connectMs ?? 0;
  const targets = compileTargets(route, where, upstreams, poolSettings, connectTimeoutMs);
  if (!targets.ok) return targets;

  const rewritePathPrefix = route.rewrite?.pathPrefix ?? "";
  // The rewritten prefix goes into the upstream request line as written, so it must be an
  // absolute path (no query) that needs no escaping, and one normalization leaves alone.
  const rewriteProblem =
    rewritePathPrefix === "" ? undefined : requestPathProblem(rewritePathPrefix);
  if (rewriteProblem !== undefined) return fail(`${where}: rewrite.pathPrefix ${rewriteProblem}`);
  if (rewritePathPrefix !== "" && !isRoutePath(rewritePathPrefix)) {
    return fail(`${where}: rewrite.pathPrefix ${ROUTE_PATH_RULE}`);
  }
  const rewriteHost = route.rewrite?.host ?? "";
  if (rewriteHost !== "" && !isHostHeader(rewriteHost)) {
    return fail(`${where}: rewrite.host is not a host[:port]`);
  }

  const list = targets.value;
  const only = list[0];
  let pickTarget: () => CompiledTarget | undefined;
  if (list.length === 1) {
    pickTarget = () => only;
  } else {
    const picker = new SmoothWrrPicker(list);
    pickTarget = () => picker.pick();
  }

  return {
    ok: true,
    value: Object.freeze({
      name,
      priority: route.priority,
      hosts: Object.freeze(hosts),
      pathKind,
      pathValue,
      methods: methods === undefined ? undefined : Object.freeze(methods),
      headers: Object.freeze(headers),
      targets: list,
      pickTarget,
      rewritePathPrefix: rewritePathPrefix === "" ? undefined : rewritePathPrefix,
      rewriteHost: rewriteHost === "" ? undefined : rewriteHost,
      headersTimeoutMs: timeouts?.headersMs ?? 0,
      bodyTimeoutMs: timeouts?.bodyMs ?? 0,
      connectTimeoutMs,
      totalTimeoutMs: timeouts?.totalMs ?? 0,
      // No policy on the wire (a hand-built snapshot) gets the control plane's defaults;
      // a policy that is present is taken as written, zero attempts included.
      retryAttempts: route.retry === undefined ? DEFAULT_RETRY_ATTEMPTS : route.retry.attempts,
      retryOn: Object.freeze(
        route.retry === undefined ? [...DEFAULT_RETRY_ON] : [...route.retry.on],
      ),
      staleIfErrorMs: (route.fallback?.staleIfErrorSeconds ?? 0) * 1000,
      source: route,
    }),
  };
}

function compileTargets(
  route: Route,
  where: string,
  upstreams: ReadonlyMap<string, CompiledUpstream>,
  cache: PoolSettingsCache,
  connectTimeoutMs: number,
): Compiled<readonly CompiledTarget[]> {
  if (route.upstream !== "" && route.split.length > 0) {
    return fail(`${where}: upstream and split are both set; set one`);
  }
  if (route.upstream === "" && route.split.length === 0) {
    return fail(`${where}: upstream or split must be set`);
  }
  if (route.upstream !== "") {
    const upstream = upstreams.get(route.upstream);
    if (upstream === undefined) {
      return fail(`${where}: upstream "${route.upstream}" is not in the snapshot`);
    }
    const settings = settingsFor(cache, connectTimeoutMs, upstream);
    return { ok: true, value: Object.freeze([target(upstream, 1, settings)]) };
  }
  const targets: CompiledTarget[] = [];
  for (const [i, split] of route.split.entries()) {
    const upstream = upstreams.get(split.upstream);
    if (upstream === undefined) {
      return fail(`${where}: split[${i}].upstream "${split.upstream}" is not in the snapshot`);
    }
    if (targets.some((t) => t.upstream === upstream)) {
      return fail(`${where}: split[${i}].upstream repeats "${split.upstream}"`);
    }
    if (!Number.isInteger(split.weight) || split.weight < 1 || split.weight > MAX_SPLIT_WEIGHT) {
      return fail(
        `${where}: split[${i}].weight must be 1..${MAX_SPLIT_WEIGHT}, got ${split.weight}`,
      );
    }
    const settings = settingsFor(cache, connectTimeoutMs, upstream);
    targets.push(target(upstream, split.weight, settings));
  }
  return { ok: true, value: Object.freeze(targets) };
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
  const key = `${connectTimeoutMs}/${connections}/${keepAliveTimeoutMs}`;
  let settings = cache.get(key);
  if (settings === undefined) {
    settings = Object.freeze({ key, connectTimeoutMs, connections, keepAliveTimeoutMs });
    cache.set(key, settings);
  }
  return settings;
}
