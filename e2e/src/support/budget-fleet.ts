import type { ApplyResource } from "./admin-client.js";
import { tenantResource } from "./tenant-resource.js";

/** The API key of tenant "limited" (20 requests a minute). */
export const LIMITED_KEY = "limited-tenant-key-1";
/** The API key of tenant "burst" (20 requests a minute, used for a burst at a window's start). */
export const BURST_KEY = "burst-tenant-key-2";
/** The API key of tenant "spender" (100 tokens a day). */
export const SPENDER_KEY = "spender-tenant-key-3";

/**
 * The config the fleet budget tests share: upstream "model" at `modelAddress`, the three
 * tenants above, and route "api" sending /v1 to the model for tenants only, without retries
 * (a retry would count one client request twice against a budget).
 */
export function budgetFleetResources(modelAddress: string): ApplyResource[] {
  return [
    { kind: "upstream", name: "model", spec: { nodes: [{ address: modelAddress }] } },
    tenantResource("limited", LIMITED_KEY, { requestsPerMinute: 20 }),
    tenantResource("burst", BURST_KEY, { requestsPerMinute: 20 }),
    tenantResource("spender", SPENDER_KEY, { tokensPerDay: 100 }),
    {
      kind: "route",
      name: "api",
      spec: {
        match: { pathPrefix: "/v1" },
        upstream: "model",
        retry: { attempts: 0 },
        auth: { tenants: "required" },
      },
    },
  ];
}
