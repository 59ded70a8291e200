import { create, QuotaConsumptionSchema, QuotaKind } from "@clawgate/proto";
import { pino } from "pino";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { registerQuotaMetrics } from "../metrics/quota-metrics.js";
import { type LeaseGrant, QuotaLedger } from "./quota-ledger.js";
import { quotaLedgerReports } from "./quota-ledger-reports.js";

const ask = (consumed: number) =>
  create(QuotaConsumptionSchema, {
    tenant: "acme",
    kind: QuotaKind.REQUESTS_PER_MINUTE,
    consumed: BigInt(consumed),
    wantsMore: true,
  });

describe("a quota ledger's reports on a running control plane", () => {
  it("counts and logs a shared count the store refused, retries it after a pause, and counts a budget spent", async () => {
    const registry = new Registry();
    const warnings: Array<Record<string, unknown>> = [];
    const logger = pino(
      { level: "warn" },
      { write: (line: string) => warnings.push(JSON.parse(line)) },
    );
    const clock = { now: 0 };
    let storeUp = false;
    let reserves = 0;
    const ledger = new QuotaLedger({
      limitOf: () => 2,
      holders: () => 1,
      now: () => clock.now,
      reserveRetryMs: 1_000,
      counter: {
        // A store that refuses (a turn later, so a retry loop would show as many reserves
        // rather than hang the test) until it comes back, then reserves everything left.
        reserve: (_key, limit) => {
          reserves++;
          if (storeUp) return { units: limit, total: limit };
          return new Promise((_resolve, reject) =>
            setImmediate(() => reject(new Error("etcdserver: request timed out"))),
          );
        },
        charge: () => ({ units: 0, total: 0 }),
      },
      ...quotaLedgerReports(logger, registerQuotaMetrics(registry)),
    });
    const delivered: LeaseGrant[] = [];
    ledger.connect("dp-a", (grants) => delivered.push(...grants));

    // The ask waits for the reservation; when the store refuses, it is answered with no share
    // (not "exhausted": the tenant may be under its limit), and the store is not asked again.
    expect(ledger.report("dp-a", [ask(0)])).toEqual([]);
    await expect
      .poll(() => delivered)
      .toEqual([expect.objectContaining({ granted: 0, exhausted: false })]);
    expect(reserves).toBe(1);
    expect(warnings).toEqual([
      expect.objectContaining({
        tenant: "acme",
        window: 0,
        err: expect.objectContaining({ message: "etcdserver: request timed out" }),
      }),
    ]);
    expect(await registry.metrics()).toContain("clawgate_quota_store_errors_total 1\n");

    // Within the pause an ask is answered at once from what is on hand, without the store.
    storeUp = true;
    expect(ledger.report("dp-a", [ask(0)])[0]).toMatchObject({ granted: 0, exhausted: false });
    expect(reserves).toBe(1);
    clock.now = 1_000;
    expect(ledger.report("dp-a", [ask(0)])[0]).toMatchObject({ granted: 1 });
    expect(reserves).toBe(2);
    expect(ledger.report("dp-a", [ask(2)])[0]).toMatchObject({ exhausted: true });
    expect(await registry.metrics()).toContain(
      'clawgate_quota_exhausted_total{tenant="acme",kind="requests-per-minute"} 1\n',
    );
  });
});
