import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { HealthRegistry, SYNC_AT_ONCE_NODES } from "./health-registry.js";
import type { HealthCheckSettings, HealthTarget } from "./health-targets.js";
import type { HealthChange } from "./node-health.js";
import type { ProbeEvidence, ProbeResult, ProbeTarget } from "./prober/probe-protocol.js";
import type { Prober } from "./prober/probe-worker-client.js";

/** A prober the test drives: it records what the registry asked and delivers results by hand. */
class FakeProber implements Prober {
  readonly byUpstream = new Map<string, readonly ProbeTarget[]>();
  /** The upstreams named by each setUpstreams call. */
  readonly calls: string[][] = [];
  readonly probeNows: { upstream: string; address: string; ticket: number }[] = [];
  closed = false;
  deliver: (result: ProbeResult) => void = () => {};
  /** Several results in one call, as the worker posts the probes that ended in one of its turns. */
  deliverAll: (results: readonly ProbeResult[]) => void = () => {};

  /** Every node the prober was last told to probe. */
  get targets(): ProbeTarget[] {
    return [...this.byUpstream.values()].flat();
  }
  setUpstreams(changes: ReadonlyMap<string, readonly ProbeTarget[]>): void {
    this.calls.push([...changes.keys()]);
    for (const [upstream, targets] of changes) {
      if (targets.length === 0) this.byUpstream.delete(upstream);
      else this.byUpstream.set(upstream, targets);
    }
  }
  probeNow(upstream: string, address: string, ticket: number): void {
    this.probeNows.push({ upstream, address, ticket });
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

function setup(turns: { syncTurnMs?: number; turnClock?: () => number } = {}) {
  const clock = new FakeClock(1_000);
  const prober = new FakeProber();
  const registry = new HealthRegistry({
    clock,
    // One turn for any sync unless a test cuts it: a stall of the test machine must not.
    syncTurnMs: turns.syncTurnMs ?? Number.POSITIVE_INFINITY,
    turnClock: turns.turnClock,
    prober: (onResults) => {
      prober.deliver = (result) => onResults([result]);
      prober.deliverAll = onResults;
      return prober;
    },
  });
  const changes: HealthChange[] = [];
  registry.onChange((c) => changes.push(c));
  const probe = (
    address: string,
    ok: boolean,
    options: { upstream?: string; ticket?: number; evidence?: ProbeEvidence } = {},
  ) =>
    prober.deliver({
      type: "result",
      upstream: options.upstream ?? "agents",
      address,
      ok,
      evidence: options.evidence ?? (ok ? { tcpMs: 1 } : { error: "ECONNREFUSED" }),
      durationMs: 1,
      at: clock.now(),
      ticket: options.ticket ?? 0,
    });
  return { clock, prober, registry, changes, probe };
}

function node(
  address: string,
  healthCheck: Partial<HealthCheckSettings> = {},
  upstream = "agents",
): HealthTarget {
  const [host = "", port = "0"] = address.split(":");
  return { upstream, address, host, port: Number(port), healthCheck };
}

describe("HealthRegistry, results in batches", () => {
  it("applies a batch in order, skipping results about nodes it does not watch", () => {
    const { clock, prober, registry, changes } = setup();
    registry.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    const result = (address: string, ok: boolean): ProbeResult => ({
      type: "result",
      upstream: "agents",
      address,
      ok,
      evidence: ok ? { tcpMs: 1 } : { error: "ECONNREFUSED" },
      durationMs: 1,
      at: clock.now(),
      ticket: 0,
    });
    // One worker turn: two failures of .1 (the threshold), one of a node removed meanwhile,
    // one success of .2.
    prober.deliverAll([
      result("10.0.0.1:80", false),
      result("10.0.0.9:80", false),
      result("10.0.0.1:80", false),
      result("10.0.0.2:80", true),
    ]);
    expect(registry.state("agents", "10.0.0.1:80")).toBe("evicted");
    expect(registry.state("agents", "10.0.0.2:80")).toBe("healthy");
    expect(registry.state("agents", "10.0.0.9:80")).toBeUndefined();
    expect(changes.map((c) => `${c.address} ${c.from}->${c.to}`)).toEqual([
      "10.0.0.1:80 healthy->evicted",
    ]);
    expect(registry.unusableCount).toBe(1);
  });
});

describe("HealthRegistry.sync", () => {
  it("syncs a whole config across event-loop turns and says when it is done", async () => {
    // A clock that moves a whole turn per upstream: every upstream synced ends a turn.
    let now = 0;
    const { registry, prober } = setup({ syncTurnMs: 10, turnClock: () => (now += 10) });
    const targets: HealthTarget[] = [];
    for (let u = 0; u < 50; u++) {
      targets.push(node(`10.0.${u}.1:80`, {}, `u-${u}`), node(`10.0.${u}.2:80`, {}, `u-${u}`));
    }
    let turns = 0;
    let syncing = true;
    const ticker = (): void => {
      if (!syncing) return;
      turns += 1;
      setImmediate(ticker);
    };
    setImmediate(ticker);
    registry.sync(targets);
    // The call itself synced the first upstream only; the others wait their turn.
    expect(registry.state("u-0", "10.0.0.1:80")).toBe("healthy");
    expect(registry.state("u-49", "10.0.49.1:80")).toBeUndefined();
    expect(prober.targets).toHaveLength(2);
    await registry.synced();
    syncing = false;
    expect(turns).toBeGreaterThanOrEqual(40);
    expect(registry.state("u-49", "10.0.49.2:80")).toBe("healthy");
    expect(prober.targets).toHaveLength(100);
    // Each turn handed the prober the upstreams it synced, never the whole set again.
    expect(prober.calls.every((call) => call.length === 1)).toBe(true);
  });

  it("starts a sync of more than SYNC_AT_ONCE_NODES nodes on the next turn, not in the caller's", async () => {
    // One turn for the whole sync (no turn limit): before, all of it ran inside the call, the
    // turn of the snapshot's swap.
    const { registry, prober } = setup();
    const targets: HealthTarget[] = [];
    for (let i = 0; i <= SYNC_AT_ONCE_NODES; i++) {
      targets.push(node(`10.1.${i >> 8}.${i & 255}:80`, {}, `u-${i % 50}`));
    }
    registry.sync(targets);
    expect(registry.state("u-0", "10.1.0.0:80")).toBeUndefined();
    expect(prober.targets).toHaveLength(0);
    await registry.synced();
    expect(registry.state("u-0", "10.1.0.0:80")).toBe("healthy");
    expect(prober.targets).toHaveLength(SYNC_AT_ONCE_NODES + 1);
  });

  it("hands the prober only the upstreams a change touches", () => {
    const { registry, prober } = setup();
    registry.sync([node("10.0.0.1:80"), node("10.0.1.1:80", {}, "models")]);
    registry.syncUpstreams(new Map([["models", [node("10.0.1.2:80", {}, "models")]]]));
    expect(prober.calls.at(-1)).toEqual(["models"]);
    expect(prober.targets.map((t) => t.address)).toEqual(["10.0.0.1:80", "10.0.1.2:80"]);
  });

  it("starts new nodes healthy and hands the prober every node with defaults filled", () => {
    const { registry, prober } = setup();
    registry.sync([
      node("10.0.0.1:80", { intervalMs: 500, path: "/healthz", expectStatus: "ok" }),
      node("10.0.0.2:80", { intervalMs: 0, timeoutMs: 0 }),
      node("10.0.0.3:80", {}, "models"),
    ]);
    expect(registry.isUsable("agents", "10.0.0.1:80")).toBe(true);
    expect(registry.state("models", "10.0.0.3:80")).toBe("healthy");
    expect(prober.targets).toEqual([
      {
        upstream: "agents",
        address: "10.0.0.1:80",
        host: "10.0.0.1",
        port: 80,
        intervalMs: 500,
        timeoutMs: 3_000,
        path: "/healthz",
        expectStatus: "ok",
      },
      {
        upstream: "agents",
        address: "10.0.0.2:80",
        host: "10.0.0.2",
        port: 80,
        intervalMs: 10_000,
        timeoutMs: 3_000,
        path: "",
        expectStatus: "",
      },
      {
        upstream: "models",
        address: "10.0.0.3:80",
        host: "10.0.0.3",
        port: 80,
        intervalMs: 10_000,
        timeoutMs: 3_000,
        path: "",
        expectStatus: "",
      },
    ]);
  });

  it("keeps an evicted node evicted across a reload that changes its settings", () => {
    const { registry, prober, probe } = setup();
    registry.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    probe("10.0.0.1:80", false);
    probe("10.0.0.1:80", false);
    probe("10.0.0.2:80", false);
    expect(registry.state("agents", "10.0.0.1:80")).toBe("evicted");

    registry.sync([
      node("10.0.0.1:80", { healthyThreshold: 3, intervalMs: 200 }),
      node("10.0.0.2:80"),
    ]);
    expect(registry.state("agents", "10.0.0.1:80")).toBe("evicted");
    expect(prober.targets[0]?.intervalMs).toBe(200);
    // The new healthy threshold applies: two successes are not enough any more.
    probe("10.0.0.1:80", true);
    probe("10.0.0.1:80", true);
    expect(registry.isUsable("agents", "10.0.0.1:80")).toBe(false);
    probe("10.0.0.1:80", true);
    expect(registry.isUsable("agents", "10.0.0.1:80")).toBe(true);
    // The kept node's failure count survived the reload too: one more failure evicts it.
    probe("10.0.0.2:80", false);
    expect(registry.state("agents", "10.0.0.2:80")).toBe("evicted");
  });

  it("drops removed nodes: state, probes and late results; re-added they start healthy", () => {
    const { registry, prober, probe, changes } = setup();
    registry.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    probe("10.0.0.1:80", false);
    probe("10.0.0.1:80", false);
    registry.sync([node("10.0.0.2:80")]);
    expect(registry.state("agents", "10.0.0.1:80")).toBeUndefined();
    expect(prober.targets.map((t) => t.address)).toEqual(["10.0.0.2:80"]);
    expect(registry.snapshot().map((n) => n.address)).toEqual(["10.0.0.2:80"]);

    const before = changes.length;
    probe("10.0.0.1:80", true);
    probe("10.0.0.1:80", true);
    expect(changes.length).toBe(before);

    registry.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    expect(registry.state("agents", "10.0.0.1:80")).toBe("healthy");
  });

  it("keys nodes by upstream and address: one address in two upstreams is two nodes", () => {
    const { registry, probe } = setup();
    registry.sync([node("10.0.0.1:80"), node("10.0.0.1:80", {}, "models")]);
    probe("10.0.0.1:80", false);
    probe("10.0.0.1:80", false);
    expect(registry.isUsable("agents", "10.0.0.1:80")).toBe(false);
    expect(registry.isUsable("models", "10.0.0.1:80")).toBe(true);
    registry.sync([node("10.0.0.1:80", {}, "models")]);
    expect(registry.state("agents", "10.0.0.1:80")).toBeUndefined();
    expect(registry.state("models", "10.0.0.1:80")).toBe("healthy");
  });

  it("treats a node it does not watch as usable", () => {
    const { registry } = setup();
    expect(registry.isUsable("agents", "10.9.9.9:80")).toBe(true);
    expect(registry.state("agents", "10.9.9.9:80")).toBeUndefined();
  });
});

describe("HealthRegistry events and the passive signal", () => {
  it("evicts after two probe failures and readmits after two successes, with events", () => {
    const { registry, probe, clock, changes } = setup();
    registry.sync([node("10.0.0.1:80")]);
    probe("10.0.0.1:80", false);
    expect(changes).toEqual([]);
    clock.advance(10_000);
    probe("10.0.0.1:80", false, { evidence: { tcpMs: 0.5, httpStatus: 500, error: "http 500" } });
    expect(changes).toEqual([
      {
        upstream: "agents",
        address: "10.0.0.1:80",
        from: "healthy",
        to: "evicted",
        reason: "probe-failures",
        evidence: { tcpMs: 0.5, httpStatus: 500, error: "http 500" },
        at: 11_000,
      },
    ]);
    probe("10.0.0.1:80", true);
    probe("10.0.0.1:80", true);
    expect(changes.map((c) => c.to)).toEqual(["evicted", "healthy"]);
  });

  it("quarantines on a refusal, probes now, and ignores probes that started before it", () => {
    const { registry, prober, probe, changes } = setup();
    registry.sync([node("10.0.0.1:80")]);
    registry.reportRefused("agents", "10.0.0.1:80");
    expect(registry.isUsable("agents", "10.0.0.1:80")).toBe(false);
    expect(changes.map((c) => [c.to, c.reason])).toEqual([["quarantined", "connection-refused"]]);
    expect(prober.probeNows).toHaveLength(1);
    const ticket = prober.probeNows[0]?.ticket ?? 0;
    expect(ticket).toBeGreaterThan(0);

    // A success from a probe that began before the refusal must not clear it.
    probe("10.0.0.1:80", true, { ticket: 0 });
    expect(registry.state("agents", "10.0.0.1:80")).toBe("quarantined");
    // The confirming probe fails: one failure, still quarantined; the next evicts.
    probe("10.0.0.1:80", false, { ticket });
    expect(registry.state("agents", "10.0.0.1:80")).toBe("quarantined");
    probe("10.0.0.1:80", false, { ticket });
    expect(registry.state("agents", "10.0.0.1:80")).toBe("evicted");

    // Refusals of a node out of rotation ask for nothing more.
    registry.reportRefused("agents", "10.0.0.1:80");
    registry.reportRefused("agents", "10.9.9.9:80");
    expect(prober.probeNows).toHaveLength(1);
  });

  it("clears the quarantine when the confirming probe succeeds", () => {
    const { registry, prober, probe, changes } = setup();
    registry.sync([node("10.0.0.1:80")]);
    registry.reportRefused("agents", "10.0.0.1:80");
    probe("10.0.0.1:80", true, { ticket: prober.probeNows[0]?.ticket ?? 0 });
    expect(registry.isUsable("agents", "10.0.0.1:80")).toBe(true);
    expect(changes.map((c) => `${c.from}->${c.to}:${c.reason}`)).toEqual([
      "healthy->quarantined:connection-refused",
      "quarantined->healthy:probe-cleared",
    ]);
  });

  it("gives each refusal a new ticket", () => {
    const { registry, prober, probe } = setup();
    registry.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    registry.reportRefused("agents", "10.0.0.1:80");
    probe("10.0.0.1:80", true, { ticket: prober.probeNows[0]?.ticket ?? 0 });
    registry.reportRefused("agents", "10.0.0.1:80");
    registry.reportRefused("agents", "10.0.0.2:80");
    const tickets = prober.probeNows.map((p) => p.ticket);
    expect(new Set(tickets).size).toBe(3);
    // The old ticket is now stale for the new quarantine.
    probe("10.0.0.1:80", true, { ticket: tickets[0] ?? 0 });
    expect(registry.state("agents", "10.0.0.1:80")).toBe("quarantined");
  });

  it("counts nodes out of rotation across quarantine, eviction, readmission and removal", () => {
    const { registry, prober, probe } = setup();
    const a = "10.0.0.1:80";
    const b = "10.0.0.2:80";
    registry.sync([node(a), node(b), node(a, {}, "models")]);
    expect(registry.unusableCount).toBe(0);

    registry.reportRefused("agents", a);
    expect(registry.unusableCount).toBe(1);
    // Quarantined -> evicted stays one node out, not two.
    const ticket = prober.probeNows[0]?.ticket ?? 0;
    probe(a, false, { ticket });
    probe(a, false, { ticket });
    expect(registry.state("agents", a)).toBe("evicted");
    expect(registry.unusableCount).toBe(1);
    // A second refusal of a node already out changes nothing.
    registry.reportRefused("agents", a);
    expect(registry.unusableCount).toBe(1);

    probe(b, false);
    probe(b, false);
    expect(registry.unusableCount).toBe(2);
    probe(b, true);
    probe(b, true);
    expect(registry.state("agents", b)).toBe("healthy");
    expect(registry.unusableCount).toBe(1);

    registry.reportRefused("models", a);
    expect(registry.unusableCount).toBe(2);
    // Removing the evicted node and a quarantined one takes both out of the count; the healthy
    // node that stays moves nothing, and a node re-added starts healthy.
    registry.sync([node(b)]);
    expect(registry.unusableCount).toBe(0);
    registry.sync([node(a), node(b)]);
    expect(registry.unusableCount).toBe(0);
    probe(a, false);
    probe(a, false);
    expect(registry.unusableCount).toBe(1);
  });

  it("keeps going when a listener throws, and unsubscribes", () => {
    const { registry, probe } = setup();
    registry.sync([node("10.0.0.1:80")]);
    registry.onChange(() => {
      throw new Error("listener bug");
    });
    const seen: string[] = [];
    const off = registry.onChange((c) => seen.push(c.to));
    registry.reportRefused("agents", "10.0.0.1:80");
    expect(seen).toEqual(["quarantined"]);
    off();
    probe("10.0.0.1:80", true, { ticket: 1 });
    expect(registry.state("agents", "10.0.0.1:80")).toBe("healthy");
    expect(seen).toEqual(["quarantined"]);
  });
});

describe("HealthRegistry.snapshot and close", () => {
  it("reports every node as a NodeHealth message", () => {
    const { registry, probe, clock } = setup();
    registry.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    clock.advance(500);
    probe("10.0.0.2:80", false, { evidence: { tcpMs: 1.25, httpStatus: 200, bodyStatus: "down" } });
    probe("10.0.0.2:80", false, {
      evidence: { tcpMs: 1.25, httpStatus: 200, bodyStatus: "down", error: 'status "down"' },
    });
    const report = registry.snapshot();
    expect(report.map((n) => [n.upstream, n.address, n.state, n.evidence, n.changedAtMs])).toEqual([
      ["agents", "10.0.0.1:80", "healthy", "", 1_000n],
      [
        "agents",
        "10.0.0.2:80",
        "evicted",
        'tcp 1.3ms, http 200, status down, error status "down"',
        1_500n,
      ],
    ]);
    expect(report[0]?.$typeName).toBe("clawgate.v1.NodeHealth");
  });

  it("reports a held node in the state it left, the others as they are", () => {
    const { registry, prober, probe, changes } = setup();
    registry.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    registry.reportRefused("agents", "10.0.0.1:80");
    const ticket = prober.probeNows.at(-1)!.ticket;
    probe("10.0.0.1:80", false, { ticket });
    probe("10.0.0.1:80", false, { ticket });
    const evicted = changes.at(-1)!;
    expect([evicted.from, evicted.to]).toEqual(["quarantined", "evicted"]);
    expect(registry.snapshot(evicted).map((n) => [n.address, n.state])).toEqual([
      ["10.0.0.1:80", "quarantined"],
      ["10.0.0.2:80", "healthy"],
    ]);
    expect(registry.snapshot().map((n) => n.state)).toEqual(["evicted", "healthy"]);
  });

  it("closes the prober and ignores later calls", async () => {
    const { registry, prober, changes } = setup();
    registry.sync([node("10.0.0.1:80")]);
    await registry.close();
    expect(prober.closed).toBe(true);
    registry.sync([]);
    registry.reportRefused("agents", "10.0.0.1:80");
    expect(prober.targets).toHaveLength(1);
    expect(changes).toEqual([]);
    expect(registry.isUsable("agents", "10.0.0.1:80")).toBe(true);
  });
});
