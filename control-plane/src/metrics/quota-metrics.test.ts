import { QuotaKind } from "@clawgate/proto";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { registerQuotaMetrics } from "./quota-metrics.js";

describe("quota metrics", () => {
  it("counts spent budgets by tenant and kind, and failed writes of their shared count", async () => {
    const registry = new Registry();
    const metrics = registerQuotaMetrics(registry);
    // The error count exists before the first error, so an alert on its increase reads 0.
    expect(await registry.metrics()).toContain("clawgate_quota_store_errors_total 0\n");
    metrics.recordSpent({ tenant: "acme", kind: QuotaKind.TOKENS_PER_DAY });
    metrics.recordSpent({ tenant: "acme", kind: QuotaKind.TOKENS_PER_DAY });
    metrics.recordSpent({ tenant: "beta", kind: QuotaKind.REQUESTS_PER_MINUTE });
    metrics.recordStoreError();
    const text = await registry.metrics();
    expect(text).toContain(
      'clawgate_quota_exhausted_total{tenant="acme",kind="tokens-per-day"} 2\n',
    );
    expect(text).toContain(
      'clawgate_quota_exhausted_total{tenant="beta",kind="requests-per-minute"} 1\n',
    );
    expect(text).toContain("clawgate_quota_store_errors_total 1\n");
  });
});
