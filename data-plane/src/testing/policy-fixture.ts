import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { create, RouteSchema, type Tenant, TenantSchema } from "@clawgate/proto";
import { FakeClock } from "../clock/clock.js";
import type {
  Policy,
  PolicyAnswer,
  PolicyFactory,
  PolicyRequest,
  PolicyServices,
} from "../policy/policy.js";
import { TenantKeys } from "../policy/tenant-keys.js";
import type { RouteInit } from "./route-table-fixture.js";

type TenantInit = NonNullable<Parameters<typeof create<typeof TenantSchema>>[1]>;

/** Compiles one policy for a route "r" (and tenants), as compilePolicies would. */
export function compileFor(
  factory: PolicyFactory,
  route: Omit<RouteInit, "name">,
  tenants: TenantInit[] = [],
): Policy | undefined {
  const map = new Map<string, Tenant>();
  for (const tenant of tenants) map.set(tenant.name ?? "", create(TenantSchema, tenant));
  return factory.compile({
    route: create(RouteSchema, {
      name: "r",
      match: { pathPrefix: "/" },
      upstream: "u",
      ...route,
    } as RouteInit),
    tenants: map,
  });
}

/** The key index a snapshot holding `tenants` gives its requests. */
export function tenantKeysOf(tenants: TenantInit[]): TenantKeys {
  return new TenantKeys(tenants.map((tenant) => create(TenantSchema, tenant)));
}

/**
 * A request as policies see it: headers forwarded upstream start as the client's; the
 * snapshot it was routed by holds `tenants` (or the key index `tenantKeys`).
 */
export function policyRequest(
  init: {
    method?: string;
    headers?: IncomingHttpHeaders;
    peer?: string;
    tenants?: TenantInit[];
    tenantKeys?: TenantKeys;
  } = {},
): PolicyRequest {
  const headers = init.headers ?? {};
  const flat: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value === "string") flat.push(name, value);
  }
  return {
    req: {
      method: init.method ?? "GET",
      headers,
      socket: { remoteAddress: init.peer ?? "127.0.0.1" },
    } as unknown as IncomingMessage,
    requestId: "req-1",
    tenantKeys: init.tenantKeys ?? tenantKeysOf(init.tenants ?? []),
    headers: flat,
    tenant: undefined,
  };
}

export const services: PolicyServices = { clock: new FakeClock(1_000_000) };

/** Runs a compiled policy's onRequest; throws if the route did not compile it. */
export function run(policy: Policy | undefined, request: PolicyRequest): PolicyAnswer | undefined {
  if (policy === undefined) throw new Error("the route did not compile the policy");
  return policy.onRequest(request, services);
}
