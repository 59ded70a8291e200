import { setImmediate as turn } from "node:timers/promises";
import { create, ProbeVerdictSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { CircuitBreaker } from "./circuit-breaker.js";
import { FleetProbes } from "./fleet-probes.js";
import { ProbeRelay, workerProberId } from "./probe-relay.js";

type Claim = { upstream: string; released?: boolean; success?: boolean };

/**
 * A primary's FleetProbes and ProbeRelay with two workers, each a FleetProbes and a fleetProbe
 * breaker, wired as the processes are; messages between them arrive in a later turn (IPC).
 */
function setup(options: { stream?: boolean } = {}) {
  const clock = new FakeClock(0);
  const toControlPlane: Claim[] = [];
  const primary = new FleetProbes({
    nodeId: "dp-1",
    send: (claim) => {
      if (options.stream === false) return false;
      toControlPlane.push(claim);
      return true;
    },
    now: () => clock.now(),
    verdict: () => {},
  });
  const workers = new Map<number, { probes: FleetProbes; breaker: CircuitBreaker }>();
  const relay = new ProbeRelay({
    fleet: primary,
    nodeId: "dp-1",
    workers: () => [...workers.keys()],
    send: (id, verdict) =>
      queueMicrotask(() =>
        workers
          .get(id)
          ?.probes.onVerdict(
            create(ProbeVerdictSchema, { ...verdict, leaseMs: BigInt(verdict.leaseMs) }),
          ),
      ),
  });
  for (const id of [1, 2]) {
    const probes: FleetProbes = new FleetProbes({
      nodeId: workerProberId(id),
      send: (claim) => {
        queueMicrotask(() =>
          claim.released
            ? relay.probed(id, claim.upstream, claim.success === true)
            : relay.claim(id, claim.upstream),
        );
        return true;
      },
      now: () => clock.now(),
      verdict: (_upstream, success) => breaker.fleetVerdict(success),
    });
    const breaker: CircuitBreaker = new CircuitBreaker({
      upstream: "models",
      clock,
      jitterRatio: 0,
      policy: { consecutiveFailures: 1, cooldownMs: 1_000, halfOpenSuccesses: 1, fleetProbe: true },
      probeGate: probes,
    });
    workers.set(id, { probes, breaker });
  }
  const breaker = (id: number) => workers.get(id)!.breaker;
  /** Both workers' breakers trip, and their cooldown elapses. */
  const tripBoth = () => {
    for (const id of [1, 2]) {
      const permit = breaker(id).acquire();
      if (permit.ok) breaker(id).record(permit, "transport");
    }
    clock.advance(1_000);
  };
  /** The control plane's verdict, after the primary's FleetProbes took it (main.ts order). */
  const verdict = (prober: string, outcome = "") => {
    const message = create(ProbeVerdictSchema, {
      upstream: "models",
      prober,
      outcome,
      leaseMs: 5_000n,
    });
    primary.onVerdict(message);
    relay.onVerdict(message);
  };
  return { relay, workers, breaker, tripBoth, verdict, toControlPlane };
}

describe("ProbeRelay: one half-open probe per data plane with workers", () => {
  it("claims once for the data plane, lets one worker probe, and closes the other on its outcome", async () => {
    const { breaker, tripBoth, verdict, toControlPlane } = setup();
    tripBoth();
    // Both workers' requests find the breaker half-open: each claims, neither probes yet.
    expect(breaker(1).acquire().ok).toBe(false);
    expect(breaker(2).acquire().ok).toBe(false);
    await turn();
    expect(toControlPlane).toEqual([{ upstream: "models" }]);
    verdict("dp-1");
    await turn();
    // Worker 1 asked first: it probes; worker 2 still waits.
    const probe = breaker(1).acquire();
    expect(probe.ok).toBe(true);
    expect(breaker(2).acquire().ok).toBe(false);
    if (probe.ok) breaker(1).record(probe, "success");
    expect(breaker(1).state).toBe("closed");
    await turn();
    // The control plane hears the release; worker 2 hears the outcome from the primary.
    expect(toControlPlane.at(-1)).toEqual({ upstream: "models", released: true, success: true });
    expect(breaker(2).state).toBe("closed");
  });

  it("passes another data plane's probe and its verdict to every worker", async () => {
    const { breaker, tripBoth, verdict } = setup();
    tripBoth();
    breaker(1).acquire();
    breaker(2).acquire();
    await turn();
    verdict("dp-2");
    await turn();
    expect(breaker(1).acquire().ok).toBe(false);
    expect(breaker(2).acquire().ok).toBe(false);
    verdict("", "failure");
    await turn();
    expect(breaker(1).state).toBe("open");
    expect(breaker(2).state).toBe("open");
  });

  it("lets one worker probe for the data plane while no stream is open", async () => {
    const { breaker, tripBoth } = setup({ stream: false });
    tripBoth();
    expect(breaker(2).acquire().ok).toBe(false);
    expect(breaker(1).acquire().ok).toBe(false);
    await turn();
    expect(breaker(1).acquire().ok).toBe(false);
    const probe = breaker(2).acquire();
    expect(probe.ok).toBe(true);
    if (probe.ok) breaker(2).record(probe, "transport");
    await turn();
    expect(breaker(1).state).toBe("open");
  });

  it("hands the data plane's probe to the next worker that claims when the prober dies", async () => {
    const { relay, workers, breaker, tripBoth, verdict } = setup();
    tripBoth();
    breaker(1).acquire();
    breaker(2).acquire();
    await turn();
    verdict("dp-1");
    await turn();
    workers.delete(1);
    relay.forget(1);
    // Worker 2's claim lapses (its FleetProbes' lease), and it claims again: now it probes.
    relay.claim(2, "models");
    await turn();
    expect(breaker(2).acquire().ok).toBe(true);
  });
});
