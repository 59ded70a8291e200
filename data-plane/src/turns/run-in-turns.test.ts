import { describe, expect, it } from "vitest";
import { runInTurns } from "./run-in-turns.js";

/** A clock that moves 1 ms per read. */
function tickingClock(): () => number {
  let now = 0;
  return () => ++now;
}

/** Steps that record, each, the event-loop turn it ran in (counted by an immediate chain). */
function* recorded(count: number, turnOf: () => number, ran: number[]): Generator<void, number> {
  for (let i = 0; i < count; i++) {
    ran.push(turnOf());
    yield;
  }
  return count;
}

describe("runInTurns", () => {
  it("shares each turn's time among the runs on one clock, so two at once make no longer turns", async () => {
    let turn = 0;
    let ticking = true;
    const tick = (): void => {
      if (!ticking) return;
      turn++;
      setImmediate(tick);
    };
    setImmediate(tick);
    const now = tickingClock();
    const ran: number[] = [];
    // Before, each run took its own 10 ms of every turn: about 20 steps a turn for the two.
    const [a, b] = await Promise.all([
      runInTurns(
        recorded(200, () => turn, ran),
        { now, turnMs: 10 },
      ),
      runInTurns(
        recorded(200, () => turn, ran),
        { now, turnMs: 10 },
      ),
    ]);
    ticking = false;
    expect([a, b]).toEqual([200, 200]);
    const perTurn = new Map<number, number>();
    for (const t of ran) perTurn.set(t, (perTurn.get(t) ?? 0) + 1);
    // One run's 10 ms of steps (a clock read each) and the other's one step.
    expect(Math.max(...perTurn.values())).toBeLessThanOrEqual(12);
  });

  it("starts in the next turn when asked, and not at all once superseded there", async () => {
    const ran: number[] = [];
    const later = runInTurns(
      recorded(3, () => 0, ran),
      { laterTurn: true },
    );
    expect(ran).toEqual([]);
    expect(await later).toBe(3);
    let superseded = false;
    const dropped = runInTurns(
      recorded(3, () => 0, ran),
      {
        laterTurn: true,
        superseded: () => superseded,
      },
    );
    superseded = true;
    expect(await dropped).toBeUndefined();
    expect(ran).toHaveLength(3);
  });
});
