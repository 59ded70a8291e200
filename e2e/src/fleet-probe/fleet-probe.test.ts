import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { FakeClock } from "@clawgate/data-plane";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane, Teardown, waitFor } from "../support/index.js";
import { type BreakerHalf, sendThrough, startBreakerHalf, trip } from "./breaker-half.js";

describe("coordinated half-open probes across two data planes (breaker.fleetProbe)", () => {
  const teardown = new Teardown();
  afterAll(() => teardown.run(), 30_000);
  let cp: ControlPlane;
  let upstream: Server;
  let upstreamUrl: string;
  let probesSeen = 0;

  beforeAll(async () => {
    upstream = createServer((_req, res) => {
      probesSeen++;
      res.end("ok");
    });
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`;
    teardown.add("upstream", () => new Promise((resolve) => upstream.close(resolve)));
    cp = await startControlPlane();
    teardown.add("control plane", () => cp.stop());
    // Claims are taken only for upstreams of the published snapshot.
    await cp.admin.putUpstream("models", { nodes: [{ address: "127.0.0.1:9", weight: 1 }] });
    const written = cp.admin.lastConfigRevision;
    await waitFor(async () => (await cp.admin.snapshot()).version >= written, {
      what: "the control plane publishing the upstream",
    });
  }, 60_000);

  it("lets one data plane's probe reach the upstream, not two, and closes both on its verdict", async () => {
    const clock = new FakeClock(0);
    const a = startBreakerHalf(teardown, cp.grpcAddress, "dp-a", clock);
    const b = startBreakerHalf(teardown, cp.grpcAddress, "dp-b", clock);
    await waitFor(() => a.connected() && b.connected(), { what: "both streams open" });

    // Both breakers trip on a failure, then their cooldown elapses: both are half-open.
    trip(a.breaker);
    trip(b.breaker);
    clock.advance(1_000);

    // The first asks claim the probe; the control plane names one data plane the prober.
    let prober: BreakerHalf | undefined;
    await waitFor(
      async () => {
        if (await sendThrough(a.breaker, upstreamUrl)) prober = a;
        else if (await sendThrough(b.breaker, upstreamUrl)) prober = b;
        return prober !== undefined;
      },
      { what: "one data plane allowed to probe" },
    );
    if (prober === undefined) throw new Error("no prober");
    const waiter = prober === a ? b : a;
    // The waiter sends nothing while the prober probes...
    expect(await sendThrough(waiter.breaker, upstreamUrl)).toBe(false);
    // ...the prober's second success closes its breaker, and its verdict closes the waiter's.
    const theProber = prober;
    await waitFor(
      async () =>
        (await sendThrough(theProber.breaker, upstreamUrl)) && theProber.breaker.state === "closed",
      { what: "the prober's breaker closed" },
    );
    await waitFor(() => waiter.breaker.state === "closed", {
      what: "the waiter's breaker closed on the relayed verdict",
    });
    // Two probes from one data plane (halfOpenSuccesses 2); none from the other.
    expect(probesSeen).toBe(2);
  }, 60_000);
});
