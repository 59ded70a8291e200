import { describe, expect, it } from "vitest";
import { TurnBatch } from "./turn-batch.js";

describe("TurnBatch", () => {
  it("sends what one turn added as one batch, in order, and the next turn's as another", async () => {
    const sent: number[][] = [];
    const batch = new TurnBatch<number>((items) => sent.push(items));
    for (let i = 0; i < 1_000; i++) batch.add(i);
    expect(sent).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    batch.add(1_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent.map((items) => items.length)).toEqual([1_000, 1]);
    expect(sent[0]).toEqual(Array.from({ length: 1_000 }, (_, i) => i));
    expect(sent[1]).toEqual([1_000]);
  });

  it("sends nothing for a turn that added nothing, and flush sends at once", () => {
    const sent: string[][] = [];
    const pending: (() => void)[] = [];
    const batch = new TurnBatch<string>(
      (items) => sent.push(items),
      (callback) => pending.push(callback),
    );
    batch.add("a");
    batch.flush();
    expect(sent).toEqual([["a"]]);
    // The end of the turn finds nothing left.
    for (const run of pending.splice(0)) run();
    expect(sent).toEqual([["a"]]);
  });
});
