import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { CircuitBreaker, FakeClock, FleetProbes, SnapshotClient } from "@clawgate/data-plane";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane, Teardown, waitFor } from "../support/index.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * A data plane's breaker half, wired as data-plane/src/main.ts wires it: the real snapshot
 * client streaming from a real control plane, FleetProbes on that stream, and the upstream's
 * breaker (fleetProbe on), whose clock the test steps instead of sleeping out the cooldown.
 */
function startBreakerHalf(
  teardown: Teardown,
  grpcAddress: string,
  nodeId: string,
  clock: FakeClock,
) {
  let connected = false;
  const probes: FleetProbes = new FleetProbes({
    nodeId,
    send: (claim) => client.sendProbeClaim(claim),
    now: () => performance.now(),
    verdict: (_upstream, success) => breaker.fleetVerdict(success),
  });
  const breaker = new CircuitBreaker({
    upstream: "models",
    clock,
    jitterRatio: 0,
    policy: { consecutiveFailures: 1, cooldownMs: 1_000, halfOpenSuccesses: 2, fleetProbe: true },
    probeGate: probes,
  });
  const client: SnapshotClient = new SnapshotClient({
    addresses: [grpcAddress],
    nodeId,
    hostname: `${nodeId}.local`,
    softwareVersion: "test",
    lastAppliedVersion: () => 0,
    logger: quiet,
    apply: () => ({ ok: true }),
    onProbeVerdict: (verdict) => probes.onVerdict(verdict),
  });
  client.onStateChange((state) => {
    connected = state.status === "connected";
    if (!connected) probes.reset();
  });
  teardown.add(nodeId, () => client.stop());
  client.start();
  return { breaker, connected: () => connected };
}

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
  }, 60_000);

  it("lets one data plane's probe reach the upstream, not two, and closes both on its verdict", async () => {
    const clock = new FakeClock(0);
    const a = startBreakerHalf(teardown, cp.grpcAddress, "dp-a", clock);
    const b = startBreakerHalf(teardown, cp.grpcAddress, "dp-b", clock);
    await waitFor(() => a.connected() && b.connected(), { what: "both streams open" });

    // Both breakers trip on a failure, then their cooldown elapses: both are half-open.
    for (const { breaker } of [a, b]) {
      const permit = breaker.acquire();
      if (!permit.ok) throw new Error("a closed breaker refused");
      breaker.record(permit, "transport");
      expect(breaker.state).toBe("open");
    }
    clock.advance(1_000);

    /** Each data plane sends whatever its breaker lets through to the upstream. */
    const send = async (breaker: CircuitBreaker) => {
      const permit = breaker.acquire();
      if (!permit.ok) return false;
      await (await fetch(upstreamUrl)).text();
      breaker.record(permit, "success");
      return true;
    };
    // The first asks claim the probe; the control plane names one data plane the prober.
    let prober: typeof a | undefined;
    await waitFor(
      async () => {
        if (await send(a.breaker)) prober = a;
        else if (await send(b.breaker)) prober = b;
        return prober !== undefined;
      },
      { what: "one data plane allowed to probe" },
    );
    if (prober === undefined) throw new Error("no prober");
    const waiter = prober === a ? b : a;
    // The waiter sends nothing while the prober probes...
    expect(await send(waiter.breaker)).toBe(false);
    // ...the prober's second success closes its breaker, and its verdict closes the waiter's.
    const theProber = prober;
    await waitFor(
      async () => (await send(theProber.breaker)) && theProber.breaker.state === "closed",
      {
        what: "the prober's breaker closed",
      },
    );
    await waitFor(() => waiter.breaker.state === "closed", {
      what: "the waiter's breaker closed on the relayed verdict",
    });
    // Two probes from one data plane (halfOpenSuccesses 2); none from the other.
    expect(probesSeen).toBe(2);
  }, 60_000);
});
