import type { IncomingHttpHeaders } from "node:http";
import type { CompiledRoute } from "./compiled-types.js";
import { PrefixTree } from "./prefix-tree.js";
import { normalizeRequestHost } from "./request-host.js";

/*
 * Matching order, most specific first (the Gateway API precedence, plus priority):
 *   1. host: an exact host beats a "*.suffix" wildcard (longer suffix first), which beats
 *      routes that name no host. A more specific host tier that has no matching route falls
 *      through to the next tier.
 *   2. path: an exact path beats any prefix; a longer prefix beats a shorter one.
 *      A prefix matches on segment boundaries: "/api" matches "/api" and "/api/..." but not
 *      "/apix". A prefix ending in "/" ("/", "/api/") matches every path that starts with it.
 *      The proxy hands over the normalized path (normalize-path.ts: dot-segments
 *      removed, slashes merged, unreserved escapes decoded), and route paths are normalized
 *      the same way when compiled, so "/docs/../admin" is matched as "/admin". The query
 *      string is never part of it.
 *   3. among routes with the same path: a route that constrains methods beats one that does
 *      not, then more header conditions beat fewer; a route whose conditions fail is skipped.
 *   4. then priority, higher first; then name, so the order never depends on input order.
 * Each snapshot builds these indexes once, so a match costs the same with 10 routes or 10,000:
 * a map lookup for the exact host, one per dot of the host for wildcards (".eu.example.com",
 * then ".example.com", ...: longest suffix first), then per host tier a map lookup for the
 * exact path and a walk down a radix tree of its prefixes (prefix-tree.ts), longest first.
 */

interface HostTier {
  readonly exact: ReadonlyMap<string, readonly CompiledRoute[]>;
  readonly prefixes: PrefixTree<readonly CompiledRoute[]>;
}

export class RouteTable {
  readonly #byHost: ReadonlyMap<string, HostTier>;
  /** Keyed by the suffix with its dot: ".example.com" for "*.example.com". */
  readonly #wildcards: ReadonlyMap<string, HostTier>;
  readonly #anyHost: HostTier | undefined;

  private constructor(
    byHost: ReadonlyMap<string, HostTier>,
    wildcards: ReadonlyMap<string, HostTier>,
    anyHost: HostTier | undefined,
  ) {
    this.#byHost = byHost;
    this.#wildcards = wildcards;
    this.#anyHost = anyHost;
    Object.freeze(this);
  }

  /** Indexes compiled routes; hosts must already be lower case and valid. */
  static build(routes: readonly CompiledRoute[]): RouteTable {
    const exactHosts = new Map<string, CompiledRoute[]>();
    const wildcardHosts = new Map<string, CompiledRoute[]>();
    const anyHost: CompiledRoute[] = [];
    for (const route of routes) {
      if (route.hosts.length === 0) anyHost.push(route);
      for (const host of route.hosts) {
        const target = host.startsWith("*.") ? wildcardHosts : exactHosts;
        const key = host.startsWith("*.") ? host.slice(1) : host;
        const list = target.get(key);
        if (list) list.push(route);
        else target.set(key, [route]);
      }
    }
    const byHost = new Map<string, HostTier>();
    for (const [host, list] of exactHosts) byHost.set(host, buildTier(list));
    const wildcards = new Map<string, HostTier>();
    for (const [suffix, list] of wildcardHosts) wildcards.set(suffix, buildTier(list));
    return new RouteTable(byHost, wildcards, anyHost.length > 0 ? buildTier(anyHost) : undefined);
  }

  match(
    method: string,
    rawHost: string,
    rawPath: string,
    headers: IncomingHttpHeaders,
  ): CompiledRoute | undefined {
    const query = rawPath.indexOf("?");
    const path = query < 0 ? rawPath : rawPath.slice(0, query);
    if (this.#byHost.size > 0 || this.#wildcards.size > 0) {
      const host = normalizeRequestHost(rawHost);
      const tier = this.#byHost.get(host);
      if (tier !== undefined) {
        const route = matchTier(tier, method, path, headers);
        if (route !== undefined) return route;
      }
      if (this.#wildcards.size > 0) {
        // Leftmost dot first is longest suffix first; a dot at 0 would leave no label for
        // the "*", which must stand for at least one character.
        for (let dot = host.indexOf(".", 1); dot > 0; dot = host.indexOf(".", dot + 1)) {
          const wildcard = this.#wildcards.get(host.slice(dot));
          if (wildcard === undefined) continue;
          const route = matchTier(wildcard, method, path, headers);
          if (route !== undefined) return route;
        }
      }
    }
    return this.#anyHost === undefined
      ? undefined
      : matchTier(this.#anyHost, method, path, headers);
  }
}

function matchTier(
  tier: HostTier,
  method: string,
  path: string,
  headers: IncomingHttpHeaders,
): CompiledRoute | undefined {
  const exact = tier.exact.get(path);
  if (exact !== undefined) {
    const route = firstSatisfied(exact, method, headers);
    if (route !== undefined) return route;
  }
  return tier.prefixes.find(path, firstSatisfied, method, headers);
}

function firstSatisfied(
  routes: readonly CompiledRoute[],
  method: string,
  headers: IncomingHttpHeaders,
): CompiledRoute | undefined {
  for (const route of routes) {
    if (route.methods !== undefined && !route.methods.has(method)) continue;
    if (route.headers.length > 0 && !headersSatisfied(route, headers)) continue;
    return route;
  }
  return undefined;
}

function headersSatisfied(route: CompiledRoute, headers: IncomingHttpHeaders): boolean {
  for (const condition of route.headers) {
    // node:http builds request headers on a plain object: a condition named "constructor" or
    // "toString" would read Object.prototype, so only the request's own headers count.
    // (A "__proto__" header never reaches req.headers, so such a condition never matches.)
    if (!Object.hasOwn(headers, condition.name)) return false;
    const actual = headers[condition.name];
    if (actual === undefined) return false;
    if (typeof actual === "string") {
      if (actual !== condition.value) return false;
    } else if (!actual.includes(condition.value)) {
      return false;
    }
  }
  return true;
}

function buildTier(routes: readonly CompiledRoute[]): HostTier {
  const exact = new Map<string, CompiledRoute[]>();
  const prefixes = new Map<string, CompiledRoute[]>();
  for (const route of routes) {
    const index = route.pathKind === "exact" ? exact : prefixes;
    const list = index.get(route.pathValue);
    if (list) list.push(route);
    else index.set(route.pathValue, [route]);
  }
  for (const list of exact.values()) Object.freeze(list.sort(byPrecedence));
  for (const list of prefixes.values()) Object.freeze(list.sort(byPrecedence));
  return Object.freeze({ exact, prefixes: PrefixTree.build(prefixes) });
}

function byPrecedence(a: CompiledRoute, b: CompiledRoute): number {
  const methods = Number(b.methods !== undefined) - Number(a.methods !== undefined);
  if (methods !== 0) return methods;
  const headers = b.headers.length - a.headers.length;
  if (headers !== 0) return headers;
  const priority = b.priority - a.priority;
  if (priority !== 0) return priority;
  return compare(a.name, b.name);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
