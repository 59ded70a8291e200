import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { QuotaKind } from "@clawgate/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane, Teardown, waitFor } from "../support/index.js";
import { startLeaseHolder } from "./lease-holder.js";
import { scriptedModel } from "./scripted-model.js";

const RPM = QuotaKind.REQUESTS_PER_MINUTE;

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
});
