import type { ProbeTarget } from "../health/prober/probe-protocol.js";

/** A node's probe target at `address` ("host:port") with an HTTP check, for prober tests. */
export function probeTarget(address: string, overrides: Partial<ProbeTarget> = {}): ProbeTarget {
  const [host = "", port = "0"] = address.split(":");
  return {
    upstream: "agents",
    address,
    host,
    port: Number(port),
    intervalMs: 1_000,
    timeoutMs: 300,
    path: "/healthz",
    expectStatus: "ok",
    ...overrides,
  };
}
