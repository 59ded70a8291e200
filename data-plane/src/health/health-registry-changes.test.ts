import { describe, expect, it } from "vitest";
import { FakeClock } from "../clock/clock.js";
import { HealthRegistry } from "./health-registry.js";
import type { HealthTarget } from "./health-targets.js";
import type { ProbeResult } from "./prober/probe-protocol.js";
import type { Prober } from "./prober/probe-worker-client.js";

/*
 * Changes-only health reports (issue 9): after a whole view, the registry gives what changed
 * since, in order and every transition, so a report costs what changed, not a pass over every
 * watched node. Applying the changes on the view gives the view the registry has now.
 */

function setup(turns: { syncTurnMs?: number; turnClock?: () => number; limit?: number } = {}) {
  const clock = new FakeClock(1_000);
  let deliver: (result: ProbeResult) => void = () => {};
  const prober: Prober = { setUpstreams() {}, probeNow() {}, async close() {} };
  const registry = new HealthRegistry({
    clock,
    syncTurnMs: turns.syncTurnMs ?? Number.POSITIVE_INFINITY,
    turnClock: turns.turnClock,
    changeLogLimit: turns.limit,
    prober: (onResults) => {
      deliver = (result) => onResults([result]);
      return prober;
    },
  });
  const probe = (address: string, ok: boolean, upstream = "agents") => {
    clock.advance(10);
    deliver({
      type: "result",
      upstream,
      address,
      ok,
      evidence: ok ? { tcpMs: 1 } : { error: "ECONNREFUSED" },
      durationMs: 1,
      at: clock.now(),
      // Started after any refusal so far: evidence about it.
      ticket: Number.MAX_SAFE_INTEGER,
    });
  };
  return { registry, probe };
}

function node(address: string, upstream = "agents"): HealthTarget {
  const [host = "", port = "0"] = address.split(":");
  return { upstream, address, host, port: Number(port), healthCheck: {} };
}

type Row = [string, string];
const rows = (nodes: readonly { address: string; state: string }[]): Row[] =>
  nodes.map((n) => [n.address, n.state]);

/** A view with changes applied the way the control plane applies them. */
function apply(
  view: Map<string, string>,
  changes: { nodes: { address: string; state: string }[]; removed: { address: string }[] },
) {
  for (const { address } of changes.removed) view.delete(address);
  for (const { address, state } of changes.nodes) view.set(address, state);
  return view;
}

describe("HealthRegistry change log", () => {
  it("gives every transition since the last report, in order, and nothing twice", () => {
    const { registry, probe } = setup();
    registry.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    expect(rows(registry.snapshot())).toEqual([
      ["10.0.0.1:80", "healthy"],
      ["10.0.0.2:80", "healthy"],
    ]);
    expect(registry.takeChanges()).toEqual({ nodes: [], removed: [] });

    registry.reportRefused("agents", "10.0.0.1:80");
    probe("10.0.0.1:80", false);
    probe("10.0.0.1:80", false);
    const changes = registry.takeChanges()!;
    // Quarantined, then evicted by the second failure: both reach the control plane.
    expect(rows(changes.nodes)).toEqual([
      ["10.0.0.1:80", "quarantined"],
      ["10.0.0.1:80", "evicted"],
    ]);
    expect(changes.nodes[1]!.evidence).toBe("error ECONNREFUSED");
    expect(registry.takeChanges()).toEqual({ nodes: [], removed: [] });
  });

  it("lists nodes added and removed; a node removed after a change is listed as removed only", () => {
    const { registry, probe } = setup();
    registry.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    const view = new Map(registry.snapshot().map((n) => [n.address, n.state]));
    probe("10.0.0.2:80", false);
    probe("10.0.0.2:80", false);
    registry.sync([node("10.0.0.1:80"), node("10.0.0.3:80")]);
    const changes = registry.takeChanges()!;
    expect(rows(changes.nodes)).toEqual([["10.0.0.3:80", "healthy"]]);
    expect(changes.removed.map((n) => [n.upstream, n.address])).toEqual([
      ["agents", "10.0.0.2:80"],
    ]);
    expect([...apply(view, changes)].sort()).toEqual(rows(registry.snapshot()).sort());
  });

  it("lists a node removed and added back as removed, then as it is since", () => {
    const { registry } = setup();
    registry.sync([node("10.0.0.1:80")]);
    registry.snapshot();
    registry.sync([]);
    registry.sync([node("10.0.0.1:80")]);
    const changes = registry.takeChanges()!;
    expect(changes.removed.map((n) => n.address)).toEqual(["10.0.0.1:80"]);
    expect(rows(changes.nodes)).toEqual([["10.0.0.1:80", "healthy"]]);
  });

  it("says the whole view must go when more changed than it keeps", () => {
    const { registry, probe } = setup({ limit: 3 });
    registry.sync([node("10.0.0.1:80"), node("10.0.0.2:80")]);
    registry.snapshot();
    for (const address of ["10.0.0.1:80", "10.0.0.2:80"]) {
      probe(address, false);
      probe(address, false);
      probe(address, true);
      probe(address, true);
    }
    expect(registry.takeChanges()).toBeUndefined();
    // A whole view starts the log again.
    registry.snapshot();
    expect(registry.takeChanges()).toEqual({ nodes: [], removed: [] });
  });

  it("builds the whole view over several turns as it was at the start; changes meanwhile follow it", async () => {
    // A clock that ends a turn after every upstream.
    let now = 0;
    const { registry, probe } = setup({ syncTurnMs: 10, turnClock: () => (now += 10) });
    const targets: HealthTarget[] = [];
    for (let u = 0; u < 20; u++) targets.push(node(`10.0.${u}.1:80`, `u-${u}`));
    registry.sync(targets);
    await registry.synced();
    let turns = 0;
    let building = true;
    const ticker = (): void => {
      turns++;
      if (building) setImmediate(ticker);
    };
    setImmediate(ticker);
    const building$ = registry.snapshotInTurns();
    // While it is built: the last upstream's node is evicted, a node is added and one removed.
    await new Promise((resolve) => setImmediate(resolve));
    probe("10.0.19.1:80", false, "u-19");
    probe("10.0.19.1:80", false, "u-19");
    registry.syncUpstreams(
      new Map([
        ["u-18", [node("10.0.18.1:80", "u-18"), node("10.0.18.2:80", "u-18")]],
        ["u-17", []],
      ]),
    );
    const view = await building$;
    building = false;
    expect(turns).toBeGreaterThanOrEqual(5);
    // As at the start: all healthy, the evicted one too, the new one not yet (the removed one
    // is there only if its upstream was reached before it left: its removal follows anyway).
    expect(view.every((n) => n.state === "healthy")).toBe(true);
    expect(view.map((n) => n.address)).toContain("10.0.19.1:80");
    expect(view.map((n) => n.address)).not.toContain("10.0.18.2:80");
    const changes = registry.takeChanges()!;
    expect(rows(changes.nodes)).toEqual([
      ["10.0.19.1:80", "evicted"],
      ["10.0.18.2:80", "healthy"],
    ]);
    expect(changes.removed.map((n) => n.address)).toEqual(["10.0.17.1:80"]);
    const applied = apply(new Map(view.map((n) => [n.address, n.state])), changes);
    expect([...applied].sort()).toEqual(rows(registry.snapshot()).sort());
  });
});
