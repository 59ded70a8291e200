import { QuotaKind, type Tenant } from "@clawgate/proto";

/**
 * The ledger's view of each tenant's limits in the published config, looked up by name. The
 * index is rebuilt only when the published tenant list changes (a new snapshot), not per report.
 */
export function tenantLimits(
  tenants: () => readonly Tenant[],
): (tenant: string, kind: QuotaKind) => number {
  let indexed: readonly Tenant[] | undefined;
  let byName = new Map<string, Tenant>();
  return (name, kind) => {
    const current = tenants();
    if (current !== indexed) {
      indexed = current;
      byName = new Map(current.map((tenant) => [tenant.name, tenant]));
    }
    const tenant = byName.get(name);
    // A tenant removed meanwhile has no limit left to hold.
    if (tenant === undefined) return 0;
    switch (kind) {
      case QuotaKind.REQUESTS_PER_MINUTE:
        return tenant.requestsPerMinute;
      case QuotaKind.TOKENS_PER_MINUTE:
        return Number(tenant.tokensPerMinute);
      case QuotaKind.TOKENS_PER_DAY:
        return Number(tenant.tokensPerDay);
      default:
        return 0;
    }
  };
}
