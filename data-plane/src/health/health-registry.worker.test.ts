import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { HealthSink } from "./health-metrics.js";
import { HealthRegistry } from "./health-registry.js";
import type { HealthTarget } from "./health-targets.js";
import type { HealthChange, HealthState } from "./node-health.js";

// End to end inside the module: a real probe worker against real loopback servers.

/** A /healthz server that can be stopped and started again on the same port. */
class Backend {
  private server: Server | undefined;
  port = 0;

  async start(): Promise<void> {
    const server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ status: "ok" }));
    });
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (server === undefined) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** Records probe outcomes in order, as the registry saw them, and lets a test await the next. */
function probeLog() {
  const outcomes: boolean[] = [];
  let waiters: (() => void)[] = [];
  const sink: HealthSink = {
    track: () => {},
    change: () => {},
    forget: () => {},
    probe: (_upstream, _address, ok) => {
      outcomes.push(ok);
      const woken = waiters;
      waiters = [];
      for (const wake of woken) wake();
    },
  };
  const next = () => new Promise<void>((resolve) => waiters.push(resolve));
  return { sink, outcomes, next };
}

/** Resolves with the next change into `to`. */
function nextChange(registry: HealthRegistry, to: HealthState): Promise<HealthChange> {
  return new Promise((resolve) => {
    const off = registry.onChange((change) => {
      if (change.to !== to) return;
      off();
      resolve(change);
    });
  });
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function setup() {
  const backend = new Backend();
  await backend.start();
  const { sink, outcomes, next } = probeLog();
  const registry = new HealthRegistry({ metrics: sink });
  cleanups.push(
    () => registry.close(),
    () => backend.stop(),
  );
  const target: HealthTarget = {
    upstream: "agents",
    address: `127.0.0.1:${backend.port}`,
    host: "127.0.0.1",
    port: backend.port,
    healthCheck: {
      intervalMs: 100,
      timeoutMs: 1_000,
      unhealthyThreshold: 2,
      healthyThreshold: 2,
      path: "/healthz",
      expectStatus: "ok",
    },
  };
  registry.sync([target]);
  return { backend, registry, outcomes, address: target.address, nextProbe: next };
}

describe("HealthRegistry with a real probe worker", () => {
  it("evicts a killed node after 2 failed probes and readmits it after 2 successes", async () => {
    const { backend, registry, outcomes, address, nextProbe } = await setup();
    await nextProbe();
    expect(outcomes[0]).toBe(true);
    expect(registry.isUsable("agents", address)).toBe(true);

    const evicted = nextChange(registry, "evicted");
    await backend.stop();
    const killedAt = outcomes.length;
    const eviction = await evicted;
    expect(eviction).toMatchObject({ from: "healthy", reason: "probe-failures" });
    expect(eviction.evidence.error).toBe("ECONNREFUSED");
    // The eviction came with the second failed probe after the kill, not the first, not later.
    // (A success posted just before the kill may be delivered after it, so filter.)
    expect(outcomes.slice(killedAt).filter((ok) => !ok)).toEqual([false, false]);
    expect(outcomes.slice(-2)).toEqual([false, false]);
    expect(registry.isUsable("agents", address)).toBe(false);

    const readmitted = nextChange(registry, "healthy");
    await backend.start();
    const restartedAt = outcomes.length;
    const readmission = await readmitted;
    expect(readmission).toMatchObject({ from: "evicted", reason: "probe-successes" });
    expect(readmission.evidence).toMatchObject({ httpStatus: 200, bodyStatus: "ok" });
    // Probes in flight at the restart may still fail; the last two before readmission passed.
    expect(outcomes.slice(restartedAt).slice(-2)).toEqual([true, true]);
    expect(registry.isUsable("agents", address)).toBe(true);
    expect(registry.snapshot()[0]).toMatchObject({ state: "healthy", address });
  });

  it("quarantines on a refused request; the immediate probe clears it or confirms it", async () => {
    const { backend, registry, address } = await setup();

    // The node is up: the refusal was a blip, and the probe it triggers clears it.
    const cleared = nextChange(registry, "healthy");
    registry.reportRefused("agents", address);
    expect(registry.state("agents", address)).toBe("quarantined");
    expect(registry.isUsable("agents", address)).toBe(false);
    expect(await cleared).toMatchObject({ from: "quarantined", reason: "probe-cleared" });

    // The node is down: quarantined at once, then evicted once probes fail the threshold.
    await backend.stop();
    const evicted = nextChange(registry, "evicted");
    registry.reportRefused("agents", address);
    expect(registry.isUsable("agents", address)).toBe(false);
    expect(await evicted).toMatchObject({ from: "quarantined", reason: "probe-failures" });
  });
});
