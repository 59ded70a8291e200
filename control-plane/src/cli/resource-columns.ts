import type {
  BreakerDocument as Breaker,
  ResourceKind,
  RouteDocument as Route,
  TenantDocument as Tenant,
  UpstreamDocument as Upstream,
} from "@clawgate/proto";

/** Kind-specific columns `clawctl get` shows after NAME and REVISION. */
export interface KindColumns {
  headers: string[];
  cells(spec: unknown): string[];
}

const list = (values: readonly string[]) => (values.length === 0 ? "*" : values.join(","));

export const KIND_COLUMNS: Record<ResourceKind, KindColumns> = {
  upstreams: {
    headers: ["NODES", "BREAKER"],
    cells(spec) {
      const upstream = spec as Upstream;
      const nodes = upstream.nodes.map((node) =>
        node.weight === 1 ? node.address : `${node.address}*${node.weight}`,
      );
      return [nodes.length === 0 ? "-" : nodes.join(","), upstream.breaker];
    },
  },
  routes: {
    headers: ["HOSTS", "PATH", "METHODS", "UPSTREAM", "PRIORITY"],
    cells(spec) {
      const route = spec as Route;
      const path = route.match.path ?? `${route.match.pathPrefix}*`;
      const target =
        route.upstream ??
        (route.split ?? []).map((part) => `${part.upstream}:${part.weight}`).join(",");
      return [
        list(route.match.hosts),
        path,
        list(route.match.methods),
        target,
        String(route.priority),
      ];
    },
  },
  breakers: {
    headers: ["WINDOW", "MIN REQUESTS", "FAILURE RATIO", "CONSECUTIVE", "COOLDOWN"],
    cells(spec) {
      const breaker = spec as Breaker;
      return [
        `${breaker.windowMs}ms`,
        String(breaker.minRequests),
        String(breaker.failureRatio),
        String(breaker.consecutiveFailures),
        `${breaker.cooldownMs}ms..${breaker.maxCooldownMs}ms`,
      ];
    },
  },
  tenants: {
    headers: ["KEYS", "REQUESTS/MIN", "TOKENS/DAY", "ROUTES"],
    cells(spec) {
      const tenant = spec as Tenant;
      const limit = (value: number) => (value === 0 ? "unlimited" : String(value));
      return [
        String(tenant.apiKeySha256.length),
        limit(tenant.requestsPerMinute),
        limit(tenant.tokensPerDay),
        list(tenant.allowedRoutes),
      ];
    },
  },
};
