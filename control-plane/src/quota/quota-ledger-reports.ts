import type { Logger } from "pino";
import type { QuotaMetrics } from "../metrics/quota-metrics.js";
import type { QuotaLedgerOptions } from "./quota-ledger.js";

/**
 * Where a QuotaLedger's news goes on a running control plane: a failed write of a tenant
 * window's shared count is logged and counted (an SRE alerting on the count learns that
 * tenants get 429 for want of a store, not of budget), a budget spent fleet-wide is counted.
 */
export function quotaLedgerReports(
  logger: Pick<Logger, "warn">,
  metrics: QuotaMetrics | undefined,
): Pick<QuotaLedgerOptions, "onError" | "onSpent"> {
  return {
    onError(error, key) {
      metrics?.recordStoreError();
      logger.warn(
        { err: error, tenant: key.tenant, kind: key.kind, window: key.window },
        "could not reserve or charge a tenant budget in the store; data planes asking get no share until it answers",
      );
    },
    onSpent(key) {
      metrics?.recordSpent(key);
    },
  };
}
