import {
  create,
  type Route,
  RouteSchema,
  type Snapshot,
  type SnapshotDelta,
  SnapshotDeltaSchema,
  SnapshotSchema,
  type Upstream,
  UpstreamSchema,
} from "@clawgate/proto";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";

/** The resources a delta carries and the names it removes. */
export type DeltaInit = Partial<
  Pick<
    SnapshotDelta,
    | "routes"
    | "upstreams"
    | "breakers"
    | "tenants"
    | "removedRoutes"
    | "removedUpstreams"
    | "removedBreakers"
    | "removedTenants"
    | "baseVersion"
  >
>;

/** Upstream `u-{i}` with `nodes` nodes on its own loopback addresses; `gen` moves them. */
export function upstreamAt(i: number, nodes = 3, gen = 0): Upstream {
  return create(UpstreamSchema, {
    name: `u-${i}`,
    breaker: i % 2 === 0 ? "default" : "strict",
    nodes: Array.from({ length: nodes }, (_, j) => ({
      address: `127.${gen + 1}.${i}.${j + 1}:80`,
      weight: j + 1,
    })),
    healthCheck: { intervalMs: 10_000, timeoutMs: 1_000, unhealthyThreshold: 2 },
  });
}

/**
 * Route `r-{i}` in one of five shapes (prefix, exact, exact host, wildcard host, split with a
 * method), sending to upstream i mod `upstreams`; `priority` lets a change alter nothing else.
 */
export function routeAt(i: number, upstreams: number, priority = 0, pathTag = ""): Route {
  const upstream = `u-${i % upstreams}`;
  const other = `u-${(i + 1) % upstreams}`;
  const name = `r-${i}`;
  switch (i % 5) {
    case 0:
      return create(RouteSchema, {
        name,
        priority,
        match: { pathPrefix: `/api/v${i % 3}/s${i}${pathTag}` },
        upstream,
      });
    case 1:
      return create(RouteSchema, {
        name,
        priority,
        match: { path: `/exact/${i}${pathTag}` },
        upstream,
      });
    case 2:
      return create(RouteSchema, {
        name,
        priority,
        match: { pathPrefix: `/h/${i}${pathTag}`, hosts: [`h${i % 7}.test`] },
        upstream,
      });
    case 3:
      return create(RouteSchema, {
        name,
        priority,
        match: { pathPrefix: `/w${pathTag}`, hosts: [`*.w${i % 4}.test`] },
        upstream,
      });
    default:
      return create(RouteSchema, {
        name,
        priority,
        match: { pathPrefix: `/split/${i % 6}${pathTag}`, methods: ["GET"] },
        split: [
          { upstream, weight: 3 },
          ...(other === upstream ? [] : [{ upstream: other, weight: 1 }]),
        ],
      });
  }
}

/** A whole snapshot of `routes` routes over `upstreams` upstreams. */
export function snapshotOf(version: number, routes: number, upstreams: number): Snapshot {
  return create(SnapshotSchema, {
    version: BigInt(version),
    nonce: `n${version}`,
    createdAtMs: 1_700_000_000_000n,
    breakers: [{ name: "default" }, { name: "strict", consecutiveFailures: 2 }],
    upstreams: Array.from({ length: upstreams }, (_, i) => upstreamAt(i)),
    routes: Array.from({ length: routes }, (_, i) => routeAt(i, upstreams)),
  });
}

export function deltaOf(version: number, init: DeltaInit): SnapshotDelta {
  return create(SnapshotDeltaSchema, {
    version: BigInt(version),
    nonce: `n${version}`,
    baseVersion: BigInt(version - 1),
    createdAtMs: 1_700_000_000_000n + BigInt(version),
    ...init,
  });
}

/** Requests that reach every shape of route above, and some that reach none. */
export function requestsFor(routes: number): { method: string; host: string; path: string }[] {
  const requests: { method: string; host: string; path: string }[] = [];
  for (let i = 0; i < routes; i++) {
    requests.push({ method: "GET", host: "any.test", path: `/api/v${i % 3}/s${i}/x` });
    requests.push({ method: "GET", host: "any.test", path: `/exact/${i}` });
    requests.push({ method: "POST", host: `h${i % 7}.test`, path: `/h/${i}/y` });
    requests.push({ method: "GET", host: `a.w${i % 4}.test`, path: "/w/z" });
    requests.push({ method: "GET", host: "any.test", path: `/split/${i % 6}/q` });
    requests.push({ method: "POST", host: "any.test", path: `/split/${i % 6}/q` });
  }
  return requests;
}

/**
 * What a compiled snapshot answers, in plain data: for each request the route it matches, with
 * each target's upstream, weight and node list; and every upstream with its nodes and breaker
 * policy. Two snapshots that serve the same way give equal views.
 */
export function compiledView(
  compiled: CompiledSnapshot,
  requests: readonly { method: string; host: string; path: string }[],
): unknown {
  const matches = requests.map(({ method, host, path }) => {
    const route = compiled.match(method, host, path, {});
    if (route === undefined) return null;
    return {
      route: route.name,
      priority: route.priority,
      targets: route.targets.map((t) => ({
        upstream: t.upstream.name,
        weight: t.weight,
        pool: t.poolSettings.key,
        nodes: t.upstream.nodes.map((n) => `${n.address}*${n.weight}`),
      })),
    };
  });
  const upstreams = [...compiled.upstreams.values()]
    .map((u) => ({
      name: u.name,
      nodes: u.nodes.map((n) => ({ ...n })),
      breaker: u.breaker,
      policy: u.breakerPolicy,
    }))
    .sort((a, b) => (a.name < b.name ? -1 : 1));
  return { version: compiled.version, routeCount: compiled.routeCount, matches, upstreams };
}
