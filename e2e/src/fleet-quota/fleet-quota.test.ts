import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { QuotaKind } from "@clawgate/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane, Teardown, waitFor } from "../support/index.js";
import { startLeaseHolder } from "./lease-holder.js";

const RPM = QuotaKind.REQUESTS_PER_MINUTE;
const TPM = QuotaKind.TOKENS_PER_MINUTE;

/** Lets the stream deliver what is on its way (a share asked for) before the next request. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function withTenant(env: Record<string, string>, tenant: object, teardown: Teardown) {
  const cp: ControlPlane = await startControlPlane(env);
  teardown.add("control plane", () => cp.stop());
  await cp.admin.put("tenants", "acme", tenant);
  await waitFor(async () => (await cp.admin.snapshot()).published, {
    what: "the tenant published",
  });
  const a = startLeaseHolder(teardown, cp.grpcAddress, "dp-a");
  const b = startLeaseHolder(teardown, cp.grpcAddress, "dp-b");
  await Promise.all([a.ready, b.ready]);
  return { cp, a, b };
}

describe("fleet-wide tenant budgets through a real control plane", () => {
  const teardown = new Teardown();
  afterAll(() => teardown.run(), 30_000);
  let upstream: Server;
  let upstreamUrl: string;
  beforeAll(async () => {
    upstream = createServer((_req, res) => res.end("ok"));
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`;
    teardown.add("upstream", () => new Promise((resolve) => upstream.close(resolve)));
  });

  /** What an admitted request costs at the least: one exchange with its upstream. */
  const forward = async () => {
    await (await fetch(upstreamUrl)).text();
  };

  it("holds requestsPerMinute 20 across two data planes sharing the traffic: 18-24 pass, not 40", async () => {
    // An hour-long window: the test cannot straddle two windows by bad luck.
    const { a, b } = await withTenant(
      { CLAWGATE_QUOTA_MINUTE_MS: "3600000" },
      { requestsPerMinute: 20 },
      teardown,
    );
    let admitted = 0;
    for (let i = 0; i < 60; i++) {
      const book = i % 2 === 0 ? a.book : b.book;
      if (book.admit("acme", RPM, 20).ok) {
        admitted++;
        await forward();
      } else {
        await turn();
      }
    }
    expect(admitted).toBeGreaterThanOrEqual(18);
    expect(admitted).toBeLessThanOrEqual(24);
    // Each data plane alone would have let 20 through; together they did not get 40.
    const refused = a.book.admit("acme", RPM, 20);
    expect(refused.ok).toBe(false);
  }, 60_000);

  it("refuses a tenant whose tokens are spent on another data plane, until the window resets", async () => {
    const { a, b } = await withTenant(
      { CLAWGATE_QUOTA_MINUTE_MS: "2000" },
      { tokensPerMinute: 100 },
      teardown,
    );
    // Responses on data plane a spend the budget (each reports 60 tokens of usage)...
    await waitFor(
      async () => {
        if (a.book.admit("acme", TPM, 100, false).ok) a.book.debit("acme", TPM, 100, 60);
        a.book.flush();
        await turn();
        // ...and data plane b, which served nothing, refuses the tenant.
        const onB = b.book.admit("acme", TPM, 100, false);
        return !onB.ok && onB.retryAfterMs > 0 && onB.retryAfterMs <= 2000;
      },
      { what: "data plane b refusing the tenant whose tokens a spent", timeoutMs: 15_000 },
    );
    await waitFor(() => b.book.admit("acme", TPM, 100, false).ok, {
      what: "the token budget back after the window reset",
      timeoutMs: 15_000,
    });
  }, 60_000);
});
