import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { probeTarget } from "../../testing/probe-target.js";
import type { ProbeOutcome } from "./probe.js";
import type { ProbeResult, ProbeSpec } from "./probe-protocol.js";
import { ProbeScheduler } from "./probe-scheduler.js";

const target = probeTarget;

/** A probe the test finishes by hand; records every spec it was started with. */
function manualProbe() {
  const started: ProbeSpec[] = [];
  const pending: ((outcome: ProbeOutcome) => void)[] = [];
  const probe = (spec: ProbeSpec) => {
    started.push(spec);
    return new Promise<ProbeOutcome>((resolve) => pending.push(resolve));
  };
  const finish = async (ok = true) => {
    const resolve = pending.shift();
    if (resolve === undefined) throw new Error("no probe in flight");
    resolve({ ok, evidence: ok ? { tcpMs: 1 } : { error: "ECONNREFUSED" }, durationMs: 1 });
    // Let the scheduler's await resume.
    await vi.advanceTimersByTimeAsync(0);
  };
  return { probe, started, pending, finish };
}

function setup(random = 0.5, maxInFlight?: number) {
  const p = manualProbe();
  const results: ProbeResult[] = [];
  const scheduler = new ProbeScheduler({
    probe: p.probe,
    emit: (r) => results.push(r),
    random: () => random,
    now: () => Date.now(),
    clock: () => Date.now(),
    maxInFlight,
  });
  return { ...p, results, scheduler };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("ProbeScheduler", () => {
  it("probes a new node at a random point of its first interval, then every interval ±10 %", async () => {
    const t = setup(0.5);
    t.scheduler.setTargets([target("10.0.0.1:80")]);
    await vi.advanceTimersByTimeAsync(499);
    expect(t.started).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(t.started).toHaveLength(1);
    await t.finish();
    expect(t.results).toHaveLength(1);
    expect(t.results[0]).toMatchObject({ upstream: "agents", address: "10.0.0.1:80", ok: true });
    // random 0.5 is the middle of the jitter band: exactly the interval.
    await vi.advanceTimersByTimeAsync(999);
    expect(t.started).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(t.started).toHaveLength(2);
  });

  it("jitters the interval by at most 10 % either way", async () => {
    for (const [random, delay] of [
      [0, 900],
      [0.99, 1_098],
    ] as const) {
      const t = setup(random);
      t.scheduler.setTargets([target("10.0.0.1:80")]);
      // The first probe falls at random x interval: 0 or 990 ms here.
      await vi.advanceTimersByTimeAsync(1_000);
      expect(t.started).toHaveLength(1);
      await t.finish();
      await vi.advanceTimersByTimeAsync(delay - 1);
      expect(t.started).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1);
      expect(t.started).toHaveLength(2);
      t.scheduler.stop();
    }
  });

  it("never runs two probes of one node at once", async () => {
    const t = setup(0);
    t.scheduler.setTargets([target("10.0.0.1:80")]);
    await vi.advanceTimersByTimeAsync(0);
    expect(t.started).toHaveLength(1);
    // The probe hangs for ten intervals: nothing else starts meanwhile.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(t.started).toHaveLength(1);
    await t.finish(false);
    expect(t.results.map((r) => r.ok)).toEqual([false]);
  });

  it("stops probing removed nodes and drops their in-flight results", async () => {
    const t = setup(0);
    t.scheduler.setTargets([target("10.0.0.1:80"), target("10.0.0.2:80")]);
    await vi.advanceTimersByTimeAsync(0);
    expect(t.started.map((s) => s.port)).toEqual([80, 80]);
    t.scheduler.setTargets([target("10.0.0.2:80")]);
    expect(t.scheduler.size).toBe(1);
    await t.finish();
    await t.finish();
    expect(t.results.map((r) => r.address)).toEqual(["10.0.0.2:80"]);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(t.started.slice(2).every((s) => s.host === "10.0.0.2")).toBe(true);
  });

  it("applies changed settings to the next probe without restarting the schedule", async () => {
    const t = setup(0.5);
    t.scheduler.setTargets([target("10.0.0.1:80")]);
    await vi.advanceTimersByTimeAsync(500);
    await t.finish();
    await vi.advanceTimersByTimeAsync(500);
    t.scheduler.setTargets([target("10.0.0.1:80", { timeoutMs: 50, path: "/ready" })]);
    // Same interval: the pending timer keeps its place (500 ms left), no extra probe now.
    await vi.advanceTimersByTimeAsync(499);
    expect(t.started).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(t.started[1]).toMatchObject({ timeoutMs: 50, path: "/ready" });
  });

  it("reschedules on a changed interval", async () => {
    const t = setup(0.5);
    t.scheduler.setTargets([target("10.0.0.1:80", { intervalMs: 60_000 })]);
    await vi.advanceTimersByTimeAsync(30_000);
    await t.finish();
    t.scheduler.setTargets([target("10.0.0.1:80", { intervalMs: 100 })]);
    await vi.advanceTimersByTimeAsync(100);
    expect(t.started).toHaveLength(2);
  });

  it("probes at once on request and tags later results with the ticket", async () => {
    const t = setup(0.5);
    t.scheduler.setTargets([target("10.0.0.1:80")]);
    await vi.advanceTimersByTimeAsync(500);
    await t.finish();
    expect(t.results[0]?.ticket).toBe(0);
    t.scheduler.probeNow("agents", "10.0.0.1:80", 7);
    expect(t.started).toHaveLength(2);
    await t.finish(false);
    expect(t.results[1]).toMatchObject({ ok: false, ticket: 7 });
    // Back on the normal schedule afterwards.
    await vi.advanceTimersByTimeAsync(1_000);
    expect(t.started).toHaveLength(3);
    t.scheduler.probeNow("agents", "10.0.0.9:80", 8);
    expect(t.started).toHaveLength(3);
  });

  it("a request during a probe reruns right after it; the older probe keeps its ticket", async () => {
    const t = setup(0.5);
    t.scheduler.setTargets([target("10.0.0.1:80")]);
    await vi.advanceTimersByTimeAsync(500);
    expect(t.started).toHaveLength(1);
    t.scheduler.probeNow("agents", "10.0.0.1:80", 3);
    expect(t.started).toHaveLength(1);
    await t.finish(true);
    expect(t.started).toHaveLength(2);
    await t.finish(false);
    expect(t.results.map((r) => [r.ok, r.ticket])).toEqual([
      [true, 0],
      [false, 3],
    ]);
  });

  it("keeps at most maxInFlight probes running; the rest wait their turn and all get probed", async () => {
    // A rack whose probes all hang until their timeout: thousands due at once.
    const t = setup(0.5, 4);
    const targets = Array.from({ length: 100 }, (_, i) => target(`10.0.1.${i}:80`));
    t.scheduler.setTargets(targets);
    await vi.advanceTimersByTimeAsync(500);
    expect(t.started).toHaveLength(4);
    expect(t.scheduler.inFlight).toBe(4);
    expect(t.scheduler.queued).toBe(96);
    let peak = 0;
    while (t.pending.length > 0) {
      await t.finish(false);
      peak = Math.max(peak, t.scheduler.inFlight);
    }
    expect(peak).toBe(4);
    expect(new Set(t.results.map((r) => r.address)).size).toBe(100);
    expect(t.scheduler.queued).toBe(0);
  });

  it("drops a removed node from the wait queue", async () => {
    const t = setup(0.5, 1);
    t.scheduler.setTargets([target("10.0.0.1:80"), target("10.0.0.2:80")]);
    await vi.advanceTimersByTimeAsync(500);
    expect(t.scheduler.queued).toBe(1);
    t.scheduler.setTargets([target("10.0.0.1:80")]);
    expect(t.scheduler.queued).toBe(0);
    await t.finish();
    expect(t.started.map((spec) => spec.port)).toEqual([80]);
    expect(t.started).toHaveLength(1);
  });

  it("holds one timer for 20,000 nodes and starts only the probes that are due", async () => {
    // Issue 9's idle data plane: 20,000 nodes probed once an hour. A timer per node kept
    // 20,000 timers alive; now one timer waits for the earliest probe.
    const p = manualProbe();
    const count = 20_000;
    const intervalMs = 3_600_000;
    let draw = 0;
    const scheduler = new ProbeScheduler({
      probe: p.probe,
      emit: () => {},
      // Evenly spread draws: node i's first probe is due at i/count of the interval.
      random: () => draw++ / count,
      clock: () => Date.now(),
    });
    const targets = Array.from({ length: count }, (_, i) =>
      target(`10.${i >> 8}.${i & 255}.1:80`, { intervalMs }),
    );
    scheduler.setTargets(targets);
    expect(vi.getTimerCount()).toBe(1);
    expect(scheduler.scheduled).toBe(count);
    // A hundredth of the interval: exactly the nodes due by then are probed, nothing else.
    await vi.advanceTimersByTimeAsync(intervalMs / 100);
    const due = targets.filter((_, i) => (i / count) * intervalMs <= intervalMs / 100).length;
    expect(p.started).toHaveLength(due);
    expect(scheduler.inFlight + scheduler.scheduled).toBe(count);
    expect(vi.getTimerCount()).toBe(1);
    scheduler.stop();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("replaces one upstream's nodes and leaves the others' schedule alone", async () => {
    const t = setup(0.5);
    t.scheduler.setTargets([target("10.0.0.1:80"), target("10.0.1.1:80", { upstream: "models" })]);
    await vi.advanceTimersByTimeAsync(500);
    await t.finish();
    await t.finish();
    await vi.advanceTimersByTimeAsync(400);
    t.scheduler.setUpstreams([["models", [target("10.0.1.2:80", { upstream: "models" })]]]);
    expect(t.scheduler.size).toBe(2);
    // models' new node is first probed half an interval on (random 0.5); agents' next probe
    // keeps its place, a whole interval after its last.
    await vi.advanceTimersByTimeAsync(500);
    expect(t.started.map((s) => s.host)).toEqual(["10.0.0.1", "10.0.1.1", "10.0.1.2"]);
    await vi.advanceTimersByTimeAsync(99);
    expect(t.started).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(t.started.map((s) => s.host).slice(3)).toEqual(["10.0.0.1"]);
    t.scheduler.setUpstreams([["models", []]]);
    expect(t.scheduler.size).toBe(1);
  });

  it("refuses a maxInFlight below 1, naming it", () => {
    expect(
      () => new ProbeScheduler({ probe: manualProbe().probe, emit: () => {}, maxInFlight: 0 }),
    ).toThrow(/maxInFlight must be an integer >= 1, got 0/);
  });
});
