import pino from "pino";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { snapshotOf, upstreamAt } from "../testing/delta-fixture.js";
import { RequestHealing } from "./request-healing.js";

function compiled(version: number, upstreams: number): CompiledSnapshot {
  const result = compileSnapshot(snapshotOf(version, upstreams, upstreams));
  if (!result.ok) throw new Error(result.reason);
  return result.value;
}

/** A clock that moves a whole turn per read: every step of a sync ends a turn. */
function steppingClock(): () => number {
  let now = 0;
  return () => (now += 100);
}

function healingWith(usable: (address: string) => boolean = () => true): RequestHealing {
  return new RequestHealing({
    registry: new Registry(),
    logger: pino({ level: "silent" }),
    nodeUsable: (_upstream, address) => usable(address),
  });
}

const names = (n: number) => Array.from({ length: n }, (_, i) => `u-${i}`);

describe("RequestHealing.syncInTurns", () => {
  it("gives the event loop back while it makes a first snapshot's 2,000 upstream records", async () => {
    const healing = healingWith();
    let turns = 0;
    let syncing = true;
    const tick = (): void => {
      if (!syncing) return;
      turns++;
      setImmediate(tick);
    };
    setImmediate(tick);
    await healing.syncInTurns(compiled(1, 2_000), { now: steppingClock() });
    syncing = false;
    // 50 upstreams a step: 40 steps, each in a turn of its own with this clock.
    expect(turns).toBeGreaterThanOrEqual(35);
    for (const name of names(2_000)) expect(healing.breakers.find(name)).toBeDefined();
  });

  it("makes no record in the caller's turn, which is the turn of the snapshot's swap", async () => {
    const healing = healingWith();
    // A clock that never ends a turn: before, the whole sync ran inside the call.
    const done = healing.syncInTurns(compiled(1, 2_000), { now: () => 0 });
    expect(healing.breakers.find("u-0")).toBeUndefined();
    await done;
    for (const name of names(2_000)) expect(healing.breakers.find(name)).toBeDefined();
  });

  it("answers for every upstream of the new snapshot from the call on, before its turns reach them", async () => {
    const healing = healingWith();
    const snapshot = compiled(1, 500);
    const done = healing.syncInTurns(snapshot, { now: steppingClock() });
    // Still in the first turn: a request for the last upstream gets its record at once.
    const last = healing.upstream("u-499");
    const addresses = snapshot.upstreams.get("u-499")!.nodes.map((node) => node.address);
    expect(addresses).toContain(last?.picker.pick()?.address);
    expect(healing.upstream("u-500")).toBeUndefined();
    await done;
    // The turns kept the record made on demand: one breaker per upstream.
    expect(healing.upstream("u-499")).toBe(last);
  });

  it("keeps breakers and unchanged records, and drops upstreams that left", async () => {
    const healing = healingWith();
    healing.sync(compiled(1, 300));
    const breaker = healing.upstream("u-7")!.breaker;
    const record = healing.upstream("u-8");
    const next = compiled(2, 200);
    await healing.syncInTurns(next, { now: steppingClock() });
    expect(healing.upstream("u-7")!.breaker).toBe(breaker);
    // A compiled upstream the new snapshot did not share gets a new record, same breaker.
    expect(healing.upstream("u-8")).not.toBe(record);
    expect(healing.upstream("u-8")!.breaker).toBe(record!.breaker);
    expect(healing.upstream("u-250")).toBeUndefined();
    expect(healing.breakers.find("u-250")).toBeUndefined();
  });

  it("carries over a current picker when a node's health changes before its turn", async () => {
    const evicted = new Set<string>();
    const healing = healingWith((address) => !evicted.has(address));
    const first = compiled(1, 300);
    healing.sync(first);
    // The same compiled upstreams again: records are carried over, not rebuilt.
    const done = healing.syncInTurns(first, { now: steppingClock() });
    const [a, b] = upstreamAt(299).nodes.map((n) => n.address);
    evicted.add(a!);
    healing.nodeHealthChanged("u-299");
    await done;
    const picks = [1, 2, 3, 4].map(() => healing.upstream("u-299")!.picker.pick()?.address);
    expect(picks).not.toContain(a);
    expect(picks).toContain(b);
  });

  it("gives way to a later sync, which ends with the later snapshot's upstreams", async () => {
    const healing = healingWith();
    const first = healing.syncInTurns(compiled(1, 1_000), { now: steppingClock() });
    healing.sync(compiled(2, 100));
    await first;
    expect(healing.upstream("u-99")).toBeDefined();
    expect(healing.upstream("u-100")).toBeUndefined();
    expect(healing.breakers.find("u-500")).toBeUndefined();
  });
});
