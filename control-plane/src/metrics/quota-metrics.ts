import { Counter, type Registry } from "prom-client";
import { quotaKindName } from "../quota/quota-window-key.js";
import type { WindowKey } from "../quota/window-counter.js";

/** What the control plane's QuotaLedger tells Prometheus (onSpent, onError). */
export interface QuotaMetrics {
  /** A tenant's budget was spent fleet-wide in a window (clawgate_quota_exhausted_total). */
  recordSpent(key: Pick<WindowKey, "tenant" | "kind">): void;
  /** A tenant window's shared count could not be reserved or charged (clawgate_quota_store_errors_total). */
  recordStoreError(): void;
}

/**
 * The control plane's side of tenant budgets. The data planes count what each tenant was
 * answered (clawgate_tenant_*); what only the control plane knows is when a budget ran out for
 * the whole fleet, and when the shared count in etcd could not be written: then asks get no
 * share and the tenant's requests get 429 though it may be under its limit, which no data-plane
 * metric tells apart from a real limit.
 */
export function registerQuotaMetrics(registry: Registry): QuotaMetrics {
  const spent = new Counter({
    name: "clawgate_quota_exhausted_total",
    help: "Windows in which a tenant's fleet-wide budget ran out and this control plane revoked the shares it had handed out, by tenant and kind (requests-per-minute, tokens-per-minute, tokens-per-day).",
    labelNames: ["tenant", "kind"] as const,
    registers: [registry],
  });
  const storeErrors = new Counter({
    name: "clawgate_quota_store_errors_total",
    help: "Reservations or charges of a tenant window's shared count that the store refused or did not answer; meanwhile data planes asking get no share.",
    registers: [registry],
  });
  // Defined from the start, so an alert on its increase has a series to read before the first.
  storeErrors.inc(0);
  return {
    recordSpent(key) {
      spent.inc({ tenant: key.tenant, kind: quotaKindName(key.kind) });
    },
    recordStoreError() {
      storeErrors.inc();
    },
  };
}
