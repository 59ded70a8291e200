import { describe, expect, it } from "vitest";
import { SmoothWrrPicker } from "./smooth-wrr.js";

interface Item {
  name: string;
  weight: number;
}

function items(spec: Record<string, number>): Item[] {
  return Object.entries(spec).map(([name, weight]) => ({ name, weight }));
}

function sequence(picker: SmoothWrrPicker<Item>, n: number, skip?: (item: Item) => boolean) {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(picker.pick(skip)?.name ?? "-");
  return out.join(",");
}

describe("SmoothWrrPicker", () => {
  it.each<{ weights: Record<string, number>; n: number; expected: string }>([
    { weights: { a: 5, b: 1, c: 1 }, n: 14, expected: "a,a,b,a,c,a,a,a,a,b,a,c,a,a" },
    { weights: { a: 1, b: 1, c: 1 }, n: 6, expected: "a,b,c,a,b,c" },
    { weights: { a: 3, b: 1 }, n: 8, expected: "a,a,b,a,a,a,b,a" },
    { weights: { a: 2, b: 3 }, n: 5, expected: "b,a,b,a,b" },
    { weights: { a: 1, b: 2, c: 4 }, n: 7, expected: "c,b,c,a,c,b,c" },
    { weights: { only: 7 }, n: 3, expected: "only,only,only" },
  ])("picks $weights in the nginx order", ({ weights, n, expected }) => {
    expect(sequence(new SmoothWrrPicker(items(weights)), n)).toBe(expected);
  });

  it("shares 400 picks at 3:1 as exactly 300/100", () => {
    const picker = new SmoothWrrPicker(items({ a: 3, b: 1 }));
    const counts = new Map<string, number>();
    for (let i = 0; i < 400; i++) {
      const name = picker.pick()!.name;
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    expect(Object.fromEntries(counts)).toEqual({ a: 300, b: 100 });
  });

  it("returns undefined with no items or when every item is skipped", () => {
    expect(new SmoothWrrPicker<Item>([]).pick()).toBeUndefined();
    expect(new SmoothWrrPicker(items({ a: 1, b: 2 })).pick(() => true)).toBeUndefined();
  });

  it("stays smooth over the remaining items while one is skipped", () => {
    const picker = new SmoothWrrPicker(items({ a: 5, b: 1, c: 1 }));
    // With a skipped, b and c (1:1) alternate instead of one of them taking every pick.
    expect(sequence(picker, 6, (item) => item.name === "a")).toBe("b,c,b,c,b,c");
    const again = new SmoothWrrPicker(items({ a: 2, b: 1, c: 1 }));
    expect(sequence(again, 6, (item) => item.name === "c")).toBe("a,b,a,a,b,a");
  });

  it("keeps the item list frozen", () => {
    const picker = new SmoothWrrPicker(items({ a: 1 }));
    expect(Object.isFrozen(picker.items)).toBe(true);
    expect(Object.isFrozen(picker)).toBe(true);
  });
});
