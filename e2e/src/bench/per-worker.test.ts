import { availableParallelism } from "node:os";
import { describe, expect, it } from "vitest";
import { benchWorkers, perWorkerLine } from "./per-worker.js";
import type { Measured } from "./report-table.js";

const measured = (target: string, requestsPerSecond: number) =>
  ({ target, result: { requestsPerSecond } }) as Measured;

describe("BENCH_WORKERS", () => {
  it.each([
    [undefined, { setting: "1", count: 1 }],
    ["", { setting: "1", count: 1 }],
    ["2", { setting: "2", count: 2 }],
    ["auto", { setting: "auto", count: availableParallelism() }],
  ])("reads %j", (text, expected) => {
    expect(benchWorkers(text)).toEqual(expected);
  });

  it.each(["0", "two", "-1", "1.5"])("refuses %j, naming the knob and the value", (text) => {
    expect(() => benchWorkers(text)).toThrow(
      `BENCH_WORKERS must be a whole number of at least 1 or auto, got ${text}`,
    );
  });

  it("divides the data plane's req/s among its workers", () => {
    const rows = [measured("nginx", 60_000), measured("clawgate", 30_000)];
    expect(perWorkerLine(rows, "clawgate", 2)).toBe("clawgate: 2 workers, 15000 req/s per worker");
    expect(perWorkerLine(rows, "clawgate", 1)).toBe("clawgate: 1 worker, 30000 req/s per worker");
  });
});
