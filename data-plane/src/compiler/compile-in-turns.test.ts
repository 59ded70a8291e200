import { describe, expect, it } from "vitest";
import { compiledView, requestsFor, snapshotOf } from "../testing/delta-fixture.js";
import { compileInTurns } from "./compile-in-turns.js";
import { compileSnapshot } from "./compile-snapshot.js";

describe("compileInTurns", () => {
  it("lets the event loop run between steps and compiles what compileSnapshot does", async () => {
    let turns = 0;
    let compiling = true;
    const ticker = (): void => {
      if (!compiling) return;
      turns += 1;
      setImmediate(ticker);
    };
    setImmediate(ticker);
    // A clock that moves a whole turn per step: every step ends a turn.
    let clock = 0;
    const result = await compileInTurns(snapshotOf(1, 1_000, 50), { now: () => (clock += 10) });
    compiling = false;
    expect(turns).toBeGreaterThan(5);
    const whole = compileSnapshot(snapshotOf(1, 1_000, 50));
    if (!result?.ok || !whole.ok) throw new Error("both compile");
    const requests = requestsFor(1_000);
    expect(compiledView(result.value, requests)).toEqual(compiledView(whole.value, requests));
  });

  it("gives up, compiling nothing more, once superseded", async () => {
    let clock = 0;
    let asked = 0;
    const result = await compileInTurns(snapshotOf(1, 1_000, 50), {
      now: () => (clock += 10),
      superseded: () => ++asked >= 2,
    });
    expect(result).toBeUndefined();
    expect(asked).toBe(2);
  });

  it("refuses a bad snapshot as compileSnapshot does", async () => {
    const bad = snapshotOf(1, 3, 1);
    bad.routes[0]!.upstream = "nowhere";
    const result = await compileInTurns(bad);
    expect(result?.ok).toBe(false);
    if (result?.ok === false) expect(result.reason).toContain("names upstream nowhere");
  });
});
