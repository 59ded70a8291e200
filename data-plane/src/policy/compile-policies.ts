import type { Route, Tenant } from "@clawgate/proto";
import type { Policy, PolicyChain } from "./policy.js";
import { POLICY_LIST } from "./policy-list.js";

const NO_POLICIES: PolicyChain = Object.freeze([]);

/**
 * A route's chain: each factory of POLICY_LIST, in order, compiled against the route; those
 * the route does not use are left out, so a route without policies shares one empty chain.
 */
export function compilePolicies(route: Route, tenants: ReadonlyMap<string, Tenant>): PolicyChain {
  const chain: Policy[] = [];
  for (const factory of POLICY_LIST) {
    const policy = factory.compile({ route, tenants });
    if (policy !== undefined) chain.push(policy);
  }
  return chain.length === 0 ? NO_POLICIES : Object.freeze(chain);
}
