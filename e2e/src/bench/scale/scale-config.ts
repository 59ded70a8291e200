import type { ApplyResource } from "../../support/admin-client.js";

export interface ScaleSize {
  routes: number;
  upstreams: number;
  /** Nodes in all, spread evenly over the upstreams. */
  nodes: number;
}

export interface RouteShape {
  name: string;
  path?: string;
  pathPrefix?: string;
  hosts?: string[];
  upstream: string;
}

/**
 * Route i, one of four shapes so the table holds what a real one does (exact paths, shared
 * prefixes, exact hosts, wildcard hosts) and a request path that reaches it.
 */
export function routeShape(i: number, upstreams: number): RouteShape & { request: Request } {
  const upstream = upstreamName(i % upstreams);
  const name = `r-${i}`;
  switch (i % 10) {
    case 0:
    case 1:
    case 2:
    case 3:
      // Shared leading segments: many siblings under /api/v0 ... /api/v4.
      return {
        name,
        pathPrefix: `/api/v${i % 5}/svc-${i}`,
        upstream,
        request: { host: "gw.bench.test", path: `/api/v${i % 5}/svc-${i}/items/42` },
      };
    case 4:
    case 5:
    case 6:
      return {
        name,
        path: `/exact/${i}/status`,
        upstream,
        request: { host: "gw.bench.test", path: `/exact/${i}/status` },
      };
    case 7:
    case 8:
      return {
        name,
        pathPrefix: `/t/${i}`,
        hosts: [`h${i % 500}.bench.test`],
        upstream,
        request: { host: `h${i % 500}.bench.test`, path: `/t/${i}/x` },
      };
    default:
      return {
        name,
        pathPrefix: `/w/${i}`,
        hosts: [`*.w${i % 50}.bench.test`],
        upstream,
        request: { host: `a.w${i % 50}.bench.test`, path: `/w/${i}` },
      };
  }
}

export interface Request {
  host: string;
  path: string;
}

export function upstreamName(i: number): string {
  return `u-${i}`;
}

/**
 * Node k's address: its own loopback address (127.0.0.0/8 is all loopback on Linux), port 9.
 * Nothing listens there, so a probe is refused at once and never leaves the machine.
 */
export function nodeAddress(k: number): string {
  return `127.${1 + Math.floor(k / 65_024)}.${Math.floor(k / 254) % 256}.${1 + (k % 254)}:9`;
}

/** Resources as the admin API takes them: upstreams, then the routes that use them. */
export function scaleResources(size: ScaleSize): {
  upstreams: ApplyResource[];
  routes: ApplyResource[];
} {
  const perUpstream = Math.max(1, Math.floor(size.nodes / size.upstreams));
  const upstreams: ApplyResource[] = [];
  for (let u = 0; u < size.upstreams; u++) {
    const nodes = [];
    for (let j = 0; j < perUpstream; j++) nodes.push({ address: nodeAddress(u * perUpstream + j) });
    upstreams.push({
      kind: "upstream",
      name: upstreamName(u),
      // The longest interval the API allows, TCP only: 20,000 probes every 10 s would measure
      // the prober, not the config path.
      spec: { nodes, healthCheck: { intervalMs: 3_600_000, timeoutMs: 1_000, path: null } },
    });
  }
  const routes: ApplyResource[] = [];
  for (let i = 0; i < size.routes; i++) {
    const { name, request: _request, ...shape } = routeShape(i, size.upstreams);
    routes.push({ kind: "route", name, spec: routeSpec(shape) });
  }
  return { upstreams, routes };
}

/** The admin API document of a route shape; `priority` lets a change alter nothing else. */
export function routeSpec(shape: Omit<RouteShape, "name">, priority = 0): unknown {
  return {
    match: {
      ...(shape.path === undefined ? { pathPrefix: shape.pathPrefix } : { path: shape.path }),
      ...(shape.hosts === undefined ? {} : { hosts: shape.hosts }),
    },
    upstream: shape.upstream,
    priority,
  };
}
