import { describe, expect, it } from "vitest";
import { RetryBudget } from "./retry-budget.js";

function allowed(budget: RetryBudget): number {
  let n = 0;
  while (budget.tryRetry()) n += 1;
  return n;
}

describe("RetryBudget", () => {
  const rows: [active: number, retries: number][] = [
    [0, 3],
    [1, 3],
    [15, 3],
    [19, 3],
    [20, 4],
    [35, 7],
    [100, 20],
    [1_000, 200],
  ];
  for (const [active, retries] of rows) {
    it(`${active} active requests allow ${retries} concurrent retries`, () => {
      const budget = new RetryBudget();
      for (let i = 0; i < active; i++) budget.requestStarted();
      expect(allowed(budget)).toBe(retries);
      expect(budget.retriesInFlight).toBe(retries);
    });
  }

  it("frees a slot when a retry finishes and shrinks as requests finish", () => {
    const budget = new RetryBudget();
    for (let i = 0; i < 25; i++) budget.requestStarted();
    expect(allowed(budget)).toBe(5);
    budget.retryFinished();
    expect(budget.tryRetry()).toBe(true);
    expect(budget.tryRetry()).toBe(false);
    for (let i = 0; i < 25; i++) budget.requestFinished();
    expect(budget.activeRequests).toBe(0);
    budget.retryFinished();
    expect(budget.tryRetry()).toBe(false); // still 5 in flight, over the floor of 3
    budget.retryFinished();
    budget.retryFinished();
    budget.retryFinished();
    expect(budget.tryRetry()).toBe(true);
  });

  it("takes ratio and minimum from options and never goes negative", () => {
    const budget = new RetryBudget({ ratio: 0.5, minConcurrent: 1 });
    budget.requestFinished();
    budget.retryFinished();
    expect(budget.activeRequests).toBe(0);
    expect(budget.retriesInFlight).toBe(0);
    expect(allowed(budget)).toBe(1);
    for (let i = 0; i < 10; i++) budget.requestStarted();
    expect(allowed(budget)).toBe(4);
  });
});
