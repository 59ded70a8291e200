import { describe, expect, it } from "vitest";
import { TurnBudget } from "./turn-budget.js";

/** Work of `slices` steps of `entries` each, logging each step with the turn it ran in. */
function* work(
  name: string,
  slices: number,
  entries: number,
  log: Array<[string, number]>,
  turn: () => number,
): Generator<number, void> {
  for (let i = 0; i < slices; i++) {
    yield entries;
    log.push([name, turn()]);
  }
}

describe("TurnBudget", () => {
  it("runs work that fits in the turn at once, and spreads the rest over turns, oldest first", async () => {
    const budget = new TurnBudget(100);
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const log: Array<[string, number]> = [];
    // Fits: runs to its end in the caller's turn.
    expect(budget.run(work("small", 2, 30, log, () => turn))).toBeUndefined();
    expect(log).toEqual([
      ["small", 0],
      ["small", 0],
    ]);
    const a = budget.run(work("a", 4, 50, log, () => turn));
    const b = budget.run(work("b", 4, 50, log, () => turn));
    await Promise.all([a, b]);
    ticking = false;
    // Per turn, at most 100 entries in all, the two sharing turns.
    const perTurn = new Map<number, number>();
    for (const [name, at] of log) {
      perTurn.set(at, (perTurn.get(at) ?? 0) + (name === "small" ? 30 : 50));
    }
    expect(Math.max(...perTurn.values())).toBeLessThanOrEqual(100);
    expect(log.filter(([name]) => name !== "small").length).toBe(8);
    expect(new Set(log.filter(([name]) => name === "b").map(([, at]) => at)).size).toBeGreaterThan(
      1,
    );
  });

  it("rejects what the work throws", async () => {
    const budget = new TurnBudget(1);
    function* failing(): Generator<number, void> {
      yield 1;
      yield 1;
      throw new Error("bad node");
    }
    await expect(budget.run(failing())).rejects.toThrow("bad node");
  });

  it("refuses a budget that is not a positive integer, naming it", () => {
    expect(() => new TurnBudget(0)).toThrow("entriesPerTurn must be an integer >= 1, got 0");
  });
});
