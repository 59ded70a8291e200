import type { IncomingHttpHeaders } from "node:http";
import type { CompiledRoute } from "./compiled-types.js";
import { type PathChange, PrefixTree } from "./prefix-tree.js";
import { normalizeRequestHost } from "./request-host.js";
import { RouteCandidates } from "./route-candidates.js";

/*
 * Matching order, most specific first (the Gateway API precedence, plus priority):
 *   1. host: an exact host beats a "*.suffix" wildcard (longer suffix first), which beats
 *      routes that name no host. A more specific host tier that has no matching route falls
 *      through to the next tier.
 *   2. path: an exact path beats any prefix; a longer prefix beats a shorter one.
 *      An exact path matches with or without one trailing "/" ("/private" and "/private/" are
 *      one key, exactKey), since most backends serve both alike: a policy on one spelling must
 *      not be skipped by a request in the other. Matching is case-sensitive.
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
 * a map lookup for the exact host, one per dot of the host within the longest wildcard suffix
 * (".eu.example.com", then ".example.com", ...: longest suffix first), then per host tier a
 * lookup of the exact path and a walk down a trie of its prefixes over path segments
 * (prefix-tree.ts), longest
 * first: one lookup per segment of the request path, at any number of routes. What the routes
 * found there need (which one wins when none has conditions) is worked out when the table is
 * built (route-candidates.ts), not per request.
 */

/**
 * The routes of one host (or wildcard suffix, or of no host), indexed by path: exact paths and
 * prefixes in one tree (prefix-tree.ts), so that one walk down the request path finds both.
 * The tree itself, with no object around it: one object fewer to read per match.
 */
type HostTier = PrefixTree<RouteCandidates>;

/** Paths put in a tree between two points where RouteTable.buildSteps lets its caller pause. */
const BUILD_STEP_PATHS = 200;

/** What a host tier weighs in a build step besides its paths: about as much as 10 paths. */
const TIER_WEIGHT = 10;

/** Key of the tier of routes that name no host. */
const ANY_HOST = "";

export class RouteTable {
  readonly #byHost: ReadonlyMap<string, HostTier>;
  /** Keyed by the suffix with its dot: ".example.com" for "*.example.com". */
  readonly #wildcards: ReadonlyMap<string, HostTier>;
  readonly #anyHost: HostTier | undefined;
  /**
   * The longest wildcard suffix, dot included: a match looks for suffixes from there on, so a
   * Host of many labels costs a lookup per label of the longest suffix, not per label it has.
   */
  readonly #longestWildcard: number;

  private constructor(
    byHost: ReadonlyMap<string, HostTier>,
    wildcards: ReadonlyMap<string, HostTier>,
    anyHost: HostTier | undefined,
    longestWildcard: number,
  ) {
    this.#byHost = byHost;
    this.#wildcards = wildcards;
    this.#anyHost = anyHost;
    this.#longestWildcard = longestWildcard;
    Object.freeze(this);
  }

  /** Indexes compiled routes; hosts must already be lower case and valid. */
  static build(routes: readonly CompiledRoute[]): RouteTable {
    return finish(RouteTable.buildSteps(routes));
  }

  /**
   * `build` cut into steps of about `every` paths (PrefixTree.buildSteps): each `yield` is a
   * point where a caller may hand the event loop back. The tier of 7,000 paths at issue 9's
   * size was one step, blocking a data plane's boot for hundreds of ms when ten shared 2 cores.
   */
  static *buildSteps(
    routes: readonly CompiledRoute[],
    every = BUILD_STEP_PATHS,
  ): Generator<void, RouteTable> {
    const exactHosts = new Map<string, CompiledRoute[]>();
    const wildcardHosts = new Map<string, CompiledRoute[]>();
    const anyHost: CompiledRoute[] = [];
    let count = 0;
    for (const route of routes) {
      if (route.hosts.length === 0) anyHost.push(route);
      for (const host of route.hosts) {
        const target = host.startsWith("*.") ? wildcardHosts : exactHosts;
        const key = host.startsWith("*.") ? host.slice(1) : host;
        const list = target.get(key);
        if (list) list.push(route);
        else target.set(key, [route]);
      }
      if (++count % every === 0) yield;
    }
    yield;
    // A tier counts its routes and a fixed cost (its tree's table, maps, builder) toward a
    // step: a tier pauses only within itself, every `every` paths, so 500 hosts of 4 routes
    // each were built in one step, the longest of a boot at issue 9's size.
    let weight = 0;
    const tierDone = (routesOfTier: number): boolean => {
      weight += routesOfTier + TIER_WEIGHT;
      if (weight < every) return false;
      weight = 0;
      return true;
    };
    const byHost = new Map<string, HostTier>();
    for (const [host, list] of exactHosts) {
      byHost.set(host, yield* buildTier(list, every));
      if (tierDone(list.length)) yield;
    }
    const wildcards = new Map<string, HostTier>();
    for (const [suffix, list] of wildcardHosts) {
      wildcards.set(suffix, yield* buildTier(list, every));
      if (tierDone(list.length)) yield;
    }
    const any = anyHost.length > 0 ? yield* buildTier(anyHost, every) : undefined;
    return new RouteTable(byHost, wildcards, any, longestKey(wildcards));
  }

  /**
   * The table with `removed` (compiled routes of this table) taken out and `added` put in;
   * this one is unchanged. Only the host tiers and paths they touch are rebuilt, so a
   * one-route delta costs one path of a radix tree, not 10,000 routes.
   */
  update(removed: readonly CompiledRoute[], added: readonly CompiledRoute[]): RouteTable {
    const byTier = new Map<string, { removed: Set<CompiledRoute>; added: CompiledRoute[] }>();
    const touch = (key: string) => {
      let entry = byTier.get(key);
      if (entry === undefined) {
        entry = { removed: new Set(), added: [] };
        byTier.set(key, entry);
      }
      return entry;
    };
    for (const route of removed) for (const key of tierKeys(route)) touch(key).removed.add(route);
    for (const route of added) for (const key of tierKeys(route)) touch(key).added.push(route);
    let byHost: Map<string, HostTier> | undefined;
    let wildcards: Map<string, HostTier> | undefined;
    let anyHost = this.#anyHost;
    for (const [key, change] of byTier) {
      if (key === ANY_HOST) {
        anyHost = updateTier(anyHost, change.removed, change.added);
      } else if (key.startsWith(".")) {
        wildcards ??= new Map(this.#wildcards);
        setTier(wildcards, key, updateTier(wildcards.get(key), change.removed, change.added));
      } else {
        byHost ??= new Map(this.#byHost);
        setTier(byHost, key, updateTier(byHost.get(key), change.removed, change.added));
      }
    }
    return new RouteTable(
      byHost ?? this.#byHost,
      wildcards ?? this.#wildcards,
      anyHost,
      wildcards === undefined ? this.#longestWildcard : longestKey(wildcards),
    );
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
        // the "*", which must stand for at least one character. No suffix is longer than the
        // longest wildcard's, so the search starts there.
        const from = Math.max(1, host.length - this.#longestWildcard);
        for (let dot = host.indexOf(".", from); dot > 0; dot = host.indexOf(".", dot + 1)) {
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
  return tier.find(path, pick, method, headers);
}

function pick(
  candidates: RouteCandidates,
  method: string,
  headers: IncomingHttpHeaders,
): CompiledRoute | undefined {
  return candidates.pick(method, headers);
}

function* buildTier(routes: readonly CompiledRoute[], every: number): Generator<void, HostTier> {
  const exact = new Map<string, CompiledRoute[]>();
  const prefixes = new Map<string, CompiledRoute[]>();
  for (const [i, route] of routes.entries()) {
    const index = route.pathKind === "exact" ? exact : prefixes;
    const key = pathKey(route);
    const list = index.get(key);
    if (list) list.push(route);
    else index.set(key, [route]);
    if ((i + 1) % every === 0) yield;
  }
  const tier = yield* PrefixTree.buildSteps(candidatesOf(prefixes), candidatesOf(exact), every);
  return tier;
}

/** Each path's candidates, made as the tree takes them (so in its build steps). */
function* candidatesOf(lists: Map<string, CompiledRoute[]>): Generator<[string, RouteCandidates]> {
  for (const [path, list] of lists) yield [path, RouteCandidates.of(list) as RouteCandidates];
}

/**
 * Where a route sits in its tier's tree: its prefix, or its exact path without a trailing "/"
 * ("/" itself kept), which the tree holds for the path with one "/" more as well.
 */
function pathKey(route: CompiledRoute): string {
  const path = route.pathValue;
  if (route.pathKind === "prefix" || path.length < 2 || path.charCodeAt(path.length - 1) !== 47) {
    return path;
  }
  return path.slice(0, -1);
}

/** The length of the longest key; 0 for none. Once per build or wildcard change. */
function longestKey(map: ReadonlyMap<string, unknown>): number {
  let longest = 0;
  for (const key of map.keys()) if (key.length > longest) longest = key.length;
  return longest;
}

/** Runs steps with no pause to their end. */
function finish<T>(steps: Generator<void, T>): T {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** Host tiers a route is indexed under: each of its hosts ("*.x" as ".x"), or ANY_HOST. */
function tierKeys(route: CompiledRoute): string[] {
  if (route.hosts.length === 0) return [ANY_HOST];
  return route.hosts.map((host) => (host.startsWith("*.") ? host.slice(1) : host));
}

function setTier(map: Map<string, HostTier>, key: string, tier: HostTier | undefined): void {
  if (tier === undefined) map.delete(key);
  else map.set(key, tier);
}

/** The tier with routes removed (by identity) and added; undefined once it holds none. */
function updateTier(
  tier: HostTier | undefined,
  removed: ReadonlySet<CompiledRoute>,
  added: readonly CompiledRoute[],
): HostTier | undefined {
  const paths = new Map<string, { kind: "exact" | "prefix"; value: string }>();
  for (const route of [...removed, ...added]) {
    const key = pathKey(route);
    paths.set(`${route.pathKind} ${key}`, { kind: route.pathKind, value: key });
  }
  const before = tier ?? PrefixTree.build<RouteCandidates>([]);
  const changes: PathChange<RouteCandidates>[] = [];
  for (const { kind, value: path } of paths.values()) {
    const now = kind === "exact" ? before.getExact(path) : before.get(path);
    const list = (now?.routes ?? []).filter((route) => !removed.has(route));
    for (const route of added) {
      if (route.pathKind === kind && pathKey(route) === path) list.push(route);
    }
    changes.push({ kind, path, value: RouteCandidates.of(list) });
  }
  const after = before.withAll(changes);
  const size = after.size + after.exactSize;
  if (size === 0) return undefined;
  // Removed paths may leave empty nodes behind: once the tier has changed as often as it has
  // paths, it is rebuilt from its routes, so its size stays bounded by the config.
  if (after.changes > size) {
    const routes = new Set<CompiledRoute>();
    for (const candidates of after.values())
      for (const route of candidates.routes) routes.add(route);
    return finish(buildTier([...routes], Number.POSITIVE_INFINITY));
  }
  return after;
}
