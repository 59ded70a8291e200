import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { FakeClock } from "@clawgate/data-plane";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane, Teardown, waitFor } from "../support/index.js";
import { type BreakerHalf, sendThrough, startBreakerHalf, trip } from "./breaker-half.js";

/**
 * README "Fleet-wide limits, token budgets and coordinated probes": one probe per fleet, not
 * per control-plane replica. Two replicas share etcd; each data plane streams from one of them.
 */
describe("coordinated half-open probes across two control-plane replicas (breaker.fleetProbe)", () => {
  const teardown = new Teardown();
  afterAll(() => teardown.run(), 30_000);
  let first: ControlPlane;
  let second: ControlPlane;
  let upstreamUrl: string;
  /** Requests that reached the upstream, per upstream name in the path. */
  const probesSeen = new Map<string, number>();

  beforeAll(async () => {
    const upstream: Server = createServer((req, res) => {
      probesSeen.set(req.url ?? "", (probesSeen.get(req.url ?? "") ?? 0) + 1);
      res.end("ok");
    });
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    teardown.add("upstream", () => new Promise((resolve) => upstream.close(resolve)));
    const etcd: EtcdProcess = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    const env = { CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint };
    first = await startControlPlane({ ...env, CLAWGATE_INSTANCE_ID: "cp-1" }, { name: "cp-1" });
    teardown.add("cp-1", () => first.stop());
    second = await startControlPlane({ ...env, CLAWGATE_INSTANCE_ID: "cp-2" }, { name: "cp-2" });
    teardown.add("cp-2", () => second.stop());
    for (const name of ["models", "agents"]) {
      await first.admin.putUpstream(name, { nodes: [{ address: "127.0.0.1:9", weight: 1 }] });
    }
    const written = first.admin.lastConfigRevision;
    for (const cp of [first, second]) {
      await waitFor(async () => (await cp.admin.snapshot()).version >= written, {
        what: "both replicas publishing the upstreams",
      });
    }
  }, 90_000);

  /** Two data planes, one per replica, whose breakers on `upstream` are half-open. */
  async function halfOpenPair(upstream: string, names: [string, string]) {
    const clock = new FakeClock(0);
    const onFirst = startBreakerHalf(teardown, first.grpcAddress, names[0], clock, upstream);
    const onSecond = startBreakerHalf(teardown, second.grpcAddress, names[1], clock, upstream);
    await waitFor(() => onFirst.connected() && onSecond.connected(), { what: "both streams open" });
    trip(onFirst.breaker);
    trip(onSecond.breaker);
    clock.advance(1_000);
    return [onFirst, onSecond] as const;
  }

  /** Waits for the control plane's answer to `half`'s claim and returns the prober it names. */
  async function proberNamedTo(half: BreakerHalf): Promise<string> {
    const verdict = await waitFor(() => half.lastVerdict(), {
      what: `an answer to ${half.nodeId}'s claim`,
    });
    return verdict.prober;
  }

  it("lets one data plane in the fleet probe, and closes the other replica's on its verdict", async () => {
    const url = `${upstreamUrl}/models`;
    const [a, b] = await halfOpenPair("models", ["dp-a", "dp-b"]);
    // Both ask at once (each ask is a claim); one of them is named the prober.
    let prober: BreakerHalf | undefined;
    await waitFor(
      async () => {
        const [viaA, viaB] = await Promise.all([
          sendThrough(a.breaker, url),
          sendThrough(b.breaker, url),
        ]);
        prober = viaA ? a : viaB ? b : undefined;
        return viaA || viaB;
      },
      { what: "one data plane allowed to probe" },
    );
    if (prober === undefined) throw new Error("no prober");
    const waiter = prober === a ? b : a;
    // The waiter's replica names the other replica's data plane, and it sends nothing.
    expect(await proberNamedTo(waiter)).toBe(prober.nodeId);
    expect(await sendThrough(waiter.breaker, url)).toBe(false);
    const theProber = prober;
    await waitFor(
      async () =>
        (await sendThrough(theProber.breaker, url)) && theProber.breaker.state === "closed",
      { what: "the prober's breaker closed" },
    );
    await waitFor(() => waiter.breaker.state === "closed", {
      what: "the waiter's breaker closed on the verdict relayed by the other replica",
    });
    // Two probes from one data plane (halfOpenSuccesses 2); none from the other.
    expect(probesSeen.get("/models")).toBe(2);
  }, 60_000);

  it("lets the claim of a killed replica lapse, and a data plane of the other replica probe", async () => {
    const url = `${upstreamUrl}/agents`;
    const [c, d] = await halfOpenPair("agents", ["dp-c", "dp-d"]);
    // cp-1's data plane claims first and is named the prober, but never probes: cp-1 dies.
    expect(await sendThrough(c.breaker, url)).toBe(false);
    expect(await proberNamedTo(c)).toBe("dp-c");
    expect(await sendThrough(d.breaker, url)).toBe(false);
    expect(await proberNamedTo(d)).toBe("dp-c");
    await first.kill();
    // The claim lapses with its lease (10 s); then cp-2 names dp-d, which probes.
    await waitFor(() => sendThrough(d.breaker, url), {
      what: "dp-d allowed to probe once the dead replica's claim lapsed",
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    expect(probesSeen.get("/agents")).toBe(1);
  }, 90_000);
});
