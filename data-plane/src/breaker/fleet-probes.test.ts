import { create, ProbeVerdictSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { CircuitBreaker } from "./circuit-breaker.js";
import { FleetProbes } from "./fleet-probes.js";

function setup(connected = true) {
  const clock = new FakeClock(0);
  const sent: { upstream: string; released?: boolean; success?: boolean }[] = [];
  let breaker: CircuitBreaker | undefined;
  const probes = new FleetProbes({
    nodeId: "me",
    send: (claim) => {
      if (connected) sent.push(claim);
      return connected;
    },
    now: () => clock.now(),
    verdict: (_upstream, success) => breaker?.fleetVerdict(success),
    leaseMs: 5_000,
  });
  breaker = new CircuitBreaker({
    upstream: "models",
    clock,
    jitterRatio: 0,
    policy: { consecutiveFailures: 1, cooldownMs: 1_000, halfOpenSuccesses: 1, fleetProbe: true },
    probeGate: probes,
  });
  const trip = () => {
    const permit = breaker!.acquire();
    if (permit.ok) breaker!.record(permit, "transport");
    clock.advance(1_000);
  };
  const verdict = (prober: string, outcome = "") =>
    probes.onVerdict(
      create(ProbeVerdictSchema, { upstream: "models", prober, outcome, leaseMs: 5_000n }),
    );
  return { clock, sent, probes, breaker, trip, verdict };
}

describe("FleetProbes with a fleetProbe breaker", () => {
  it("sends no probe until the control plane names this data plane the prober, then reports", () => {
    const { breaker, sent, trip, verdict } = setup();
    trip();
    expect(breaker.acquire()).toMatchObject({ ok: false, reason: "half_open_busy" });
    expect(sent).toEqual([{ upstream: "models" }]);
    verdict("me");
    const permit = breaker.acquire();
    expect(permit.ok).toBe(true);
    if (permit.ok) breaker.record(permit, "success");
    expect(breaker.state).toBe("closed");
    expect(sent.at(-1)).toEqual({ upstream: "models", released: true, success: true });
  });

  it("closes on another data plane's success and reopens on its failure", () => {
    const { breaker, trip, verdict } = setup();
    trip();
    breaker.acquire();
    verdict("other");
    expect(breaker.acquire().ok).toBe(false);
    verdict("", "failure");
    expect(breaker.state).toBe("open");
    expect(breaker.inspect()).toMatchObject({ cooldownMs: 2_000 });
  });

  it("claims again once a prober stays silent past the lease", () => {
    const { breaker, sent, clock, trip, verdict } = setup();
    trip();
    breaker.acquire();
    verdict("other");
    clock.advance(4_999);
    breaker.acquire();
    expect(sent).toHaveLength(1);
    // FleetProbes' lease runs on its own clock reading: the fake clock here.
    clock.advance(1);
    breaker.acquire();
    expect(sent).toHaveLength(2);
  });

  it("probes on its own without a control plane", () => {
    const { breaker, trip } = setup(false);
    trip();
    expect(breaker.acquire().ok).toBe(true);
  });
});
