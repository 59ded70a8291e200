import { CircuitBreaker, type FakeClock, FleetProbes, SnapshotClient } from "@clawgate/data-plane";
import type { ProbeVerdict } from "@clawgate/proto";
import type { Teardown } from "../support/index.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

export interface BreakerHalf {
  readonly nodeId: string;
  readonly breaker: CircuitBreaker;
  connected(): boolean;
  /** The last ProbeVerdict the control plane sent this data plane, if any. */
  lastVerdict(): ProbeVerdict | undefined;
}

/**
 * A data plane's breaker half, wired as data-plane/src/main.ts wires it: the real snapshot
 * client streaming from a real control plane, FleetProbes on that stream, and the upstream's
 * breaker (fleetProbe on), whose clock the test steps instead of sleeping out the cooldown.
 */
export function startBreakerHalf(
  teardown: Teardown,
  grpcAddress: string,
  nodeId: string,
  clock: FakeClock,
  upstream = "models",
): BreakerHalf {
  let connected = false;
  let lastVerdict: ProbeVerdict | undefined;
  const probes: FleetProbes = new FleetProbes({
    nodeId,
    send: (claim) => client.sendProbeClaim(claim),
    now: () => performance.now(),
    verdict: (_upstream, success) => breaker.fleetVerdict(success),
  });
  const breaker = new CircuitBreaker({
    upstream,
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
    onProbeVerdict: (verdict) => {
      lastVerdict = verdict;
      probes.onVerdict(verdict);
    },
  });
  client.onStateChange((state) => {
    connected = state.status === "connected";
    if (!connected) probes.reset();
  });
  teardown.add(nodeId, () => client.stop());
  client.start();
  return { nodeId, breaker, connected: () => connected, lastVerdict: () => lastVerdict };
}

/** Trips the breaker on one failure; the test then steps its clock past the cooldown. */
export function trip(breaker: CircuitBreaker): void {
  const permit = breaker.acquire();
  if (!permit.ok) throw new Error("a closed breaker refused");
  breaker.record(permit, "transport");
  if (breaker.state !== "open") throw new Error(`the breaker is ${breaker.state}, not open`);
}

/** Sends whatever the breaker lets through to `url`; false when it let nothing through. */
export async function sendThrough(breaker: CircuitBreaker, url: string): Promise<boolean> {
  const permit = breaker.acquire();
  if (!permit.ok) return false;
  await (await fetch(url)).text();
  breaker.record(permit, "success");
  return true;
}
