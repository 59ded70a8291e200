import { type BreakerDocument, breakerSchema } from "./breaker-schema.js";
import type { ResourceKind } from "./problems.js";
import { type RouteDocument, routeSchema } from "./route-schema.js";
import { type TenantDocument, tenantSchema } from "./tenant-schema.js";
import { type UpstreamDocument, upstreamSchema } from "./upstream-schema.js";

/**
 * The four resource kinds, by their plural name as the API and the store spell it. Objects are
 * strict so a misspelt field is an error, not a silent no-op.
 */
export const resourceSchemas = {
  upstreams: upstreamSchema,
  routes: routeSchema,
  breakers: breakerSchema,
  tenants: tenantSchema,
} as const satisfies Record<ResourceKind, unknown>;

export const RESOURCE_KINDS = Object.keys(resourceSchemas) as ResourceKind[];

export interface ResourceDocuments {
  upstreams: UpstreamDocument;
  routes: RouteDocument;
  breakers: BreakerDocument;
  tenants: TenantDocument;
}

/** The policy upstreams naming "default" get when no breaker of that name is stored. */
export const DEFAULT_BREAKER: BreakerDocument = Object.freeze(breakerSchema.parse({}));
