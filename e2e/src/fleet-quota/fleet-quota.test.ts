import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { PolicyServices } from "@clawgate/data-plane";
import { create, QuotaKind, TenantSchema } from "@clawgate/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane, Teardown, waitFor } from "../support/index.js";
import { type LeaseHolder, startLeaseHolder } from "./lease-holder.js";
import { modelCall } from "./model-call.js";
import { scriptedModel } from "./scripted-model.js";

const RPM = QuotaKind.REQUESTS_PER_MINUTE;
const TPM = QuotaKind.TOKENS_PER_MINUTE;

async function withTenant(env: Record<string, string>, tenant: object, teardown: Teardown) {
  // A loaded CI machine has taken over 20 s (the default) to start a control plane.
  const cp: ControlPlane = await startControlPlane(env, { readyTimeoutMs: 60_000 });
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
    upstream = createServer(scriptedModel);
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
    const { cp, a, b } = await withTenant(
      { CLAWGATE_QUOTA_MINUTE_MS: "3600000" },
      { requestsPerMinute: 20 },
      teardown,
    );
    // Requests alternate between the two data planes until both are told the fleet's budget is
    // spent. A refusal while a share is on its way carries `ready`: the loop waits for that
    // answer from the control plane (a loaded machine may take a while), not for a fixed count
    // of turns. The iteration bound only stops a broken build from looping forever.
    let admitted = 0;
    const spent = new Set<LeaseHolder>();
    for (let i = 0; i < 400 && spent.size < 2; i++) {
      const holder = i % 2 === 0 ? a : b;
      const admission = holder.book.admit("acme", RPM, 20);
      if (admission.ok) {
        admitted++;
        await forward();
      } else if (admission.ready !== undefined) {
        await admission.ready;
      } else if (admission.retryAfterMs > 60_000) {
        // Refused until the hour-long window ends: the fleet's budget is spent.
        spent.add(holder);
      }
    }
    expect(spent.size).toBe(2);
    expect(admitted).toBeGreaterThanOrEqual(18);
    expect(admitted).toBeLessThanOrEqual(24);
    // Each data plane alone would have let 20 through; together they did not get 40.
    const refused = a.book.admit("acme", RPM, 20);
    expect(refused.ok).toBe(false);
    // The control plane tells Prometheus the budget ran out, once for this window.
    const metrics = await (
      await fetch(`${cp.adminUrl}/metrics`, {
        headers: { authorization: `Bearer ${cp.token}` },
        signal: AbortSignal.timeout(10_000),
      })
    ).text();
    expect(metrics).toContain(
      'clawgate_quota_exhausted_total{tenant="acme",kind="requests-per-minute"} 1\n',
    );
    expect(metrics).toContain("clawgate_quota_store_errors_total 0\n");
  }, 60_000);

  it("spends a token budget with OpenAI-style JSON and SSE usage on one data plane, revokes the other's unspent share, and resets", async () => {
    // Windows of 10 s, so the reset is seen within the test: the last wait below waits out the
    // rest of the window a spent in, half of it on average. The claims (a's usage read from JSON
    // and SSE, b's share revoked, the budget back in the next window) do not depend on the
    // length; a window that ends before a's usage is booked is handled by the loop below.
    const { a, b } = await withTenant(
      { CLAWGATE_QUOTA_MINUTE_MS: "10000" },
      { tokensPerMinute: 100 },
      teardown,
    );
    const tenant = create(TenantSchema, { name: "acme", tokensPerMinute: 100n });
    const onA: PolicyServices = { clock: { now: () => performance.now() }, quota: a.book };
    const onB: PolicyServices = { clock: { now: () => performance.now() }, quota: b.book };
    /** 60 + 60 tokens on a, reported at once: over the fleet's 100 only if both usages were read. */
    const spendOnA = async () => {
      const statuses = [
        await modelCall(onA, tenant, `${upstreamUrl}json`),
        await modelCall(onA, tenant, `${upstreamUrl}sse`),
      ];
      a.book.flush();
      return statuses;
    };
    // b takes a share first and spends none of it: its own calls go to a path that reports no
    // usage, so it has no reason to ask again.
    const share = b.nextLease((lease) => lease.kind === TPM && lease.granted > 0n);
    expect(await modelCall(onB, tenant, upstreamUrl)).toBe(200);
    let spentIn = (await share).window;
    expect(await spendOnA()).toEqual([200, 200]);
    // b, still holding its unspent share, stops admitting once the control plane has booked a's
    // usage: it pushes the spent budget to every holder of a share of that window. What the
    // design does not promise is that this reaches b in b's share's window: a loaded machine may
    // book a's usage after that window ended (then it is dropped, as that window's leases lapsed
    // on the data planes too), or the stream may break and take b's share with it. b then asks
    // again on its next call; a share of a window a has not spent in yet means a spends again.
    await waitFor(
      async () => {
        const held = b.lastLease(TPM);
        if (held !== undefined && !held.revoked && held.window !== spentIn) {
          // a's own lease of the old window may not have lapsed yet: then it spends next time.
          if ((await spendOnA()).every((status) => status === 200)) spentIn = held.window;
        }
        return (await modelCall(onB, tenant, upstreamUrl)) === 429;
      },
      {
        what: "data plane b refusing the tenant once a spent the fleet's budget",
        timeoutMs: 45_000,
      },
    );
    expect(b.lastLease(TPM)).toMatchObject({ revoked: true, exhausted: true, granted: 0n });
    await waitFor(async () => (await modelCall(onB, tenant, upstreamUrl)) === 200, {
      what: "the token budget back after the window reset",
      timeoutMs: 30_000,
    });
  }, 150_000);
});
