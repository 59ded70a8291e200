import { describe, expect, it } from "vitest";
import { formatReport, type Measured } from "./report-table.js";
import type { WrkResult } from "./wrk-output.js";

const result = (requestsPerSecond: number, errors = 0, errorKinds = ""): WrkResult => ({
  requestsPerSecond,
  requests: requestsPerSecond * 3,
  p50Ms: 1,
  p99Ms: 2,
  errors,
  errorKinds,
});
const usage = { cpuMicrosPerRequest: 50, residentMiB: 100 };

describe("formatReport", () => {
  it("says under the table which targets had errors, of what kind and in how many rounds", () => {
    const rows: Measured[] = [
      {
        target: "nginx",
        result: result(900, 12, "timeout 12"),
        usage,
        erroredRounds: { count: 2, of: 3 },
      },
      { target: "minimal", result: result(1_000), usage, erroredRounds: { count: 1, of: 3 } },
      { target: "clawgate", result: result(1_100), usage, erroredRounds: { count: 0, of: 3 } },
    ];
    const lines = formatReport(rows).split("\n");
    expect(lines.filter((l) => l.startsWith("!"))).toEqual([
      "! nginx had errors: 12 (timeout 12), in 2 of 3 rounds; not a baseline",
      "! minimal had errors: none in the reported round, in 1 of 3 rounds; not a baseline",
    ]);
    // The row itself still shows its count.
    expect(lines.find((l) => l.startsWith("nginx"))).toMatch(/ 12 /);
  });

  it("adds no note when every round of every target was clean", () => {
    const rows: Measured[] = [{ target: "minimal", result: result(1_000), usage }];
    expect(formatReport(rows)).not.toContain("!");
  });
});

describe("formatReport ratios", () => {
  const figures = (requestsPerSecond: number, p99Ms: number, cpuMicrosPerRequest: number) => ({
    result: { ...result(requestsPerSecond), p99Ms },
    usage: { cpuMicrosPerRequest, residentMiB: 100 },
  });
  const cells = (table: string, target: string) =>
    table
      .split("\n")
      .find((line) => line.startsWith(`${target} `))!
      .trim()
      .split(/\s+/);
  const column = (table: string, title: string) => {
    const header = table.split("\n")[0]!;
    // Titles hold single spaces; columns are parted by two or more.
    return header
      .trim()
      .split(/\s{2,}/)
      .indexOf(title);
  };

  it("shows req/s against the minimal proxy next to req/s against fastify", () => {
    const rows: Measured[] = [
      { target: "minimal", result: result(1_500), usage },
      { target: "fastify-proxy", result: result(1_000), usage },
      { target: "clawgate", result: result(1_200), usage },
    ];
    const table = formatReport(rows);
    const vsFastify = column(table, "req/s vs fastify");
    const vsMinimal = column(table, "req/s vs minimal");
    expect(vsMinimal).toBe(vsFastify + 1);
    expect(cells(table, "clawgate")[vsFastify]).toBe("1.20x");
    expect(cells(table, "clawgate")[vsMinimal]).toBe("0.80x");
    expect(cells(table, "minimal")[vsMinimal]).toBe("1.00x");
  });

  it("reads each ratio as the median over rounds of that round's ratio", () => {
    // Round 2's minimal proxy had a GC pause in its last percentile: its p99 is 10 ms where
    // its other rounds say 2 and 4. Round 2 is also each target's median round by req/s, the
    // one its row reports: a ratio of the rows would say 0.40x; the same-round ratios (2.00x,
    // 0.40x, 1.00x) say 1.00x.
    const rows: Measured[] = [
      {
        target: "minimal",
        ...figures(1_000, 10, 50),
        rounds: [figures(900, 2, 50), figures(1_000, 10, 50), figures(1_100, 4, 50)],
      },
      {
        target: "clawgate",
        ...figures(800, 4, 55),
        rounds: [figures(700, 4, 60), figures(800, 4, 55), figures(900, 4, 70)],
      },
    ];
    const table = formatReport(rows);
    const claw = cells(table, "clawgate");
    // p99: 4/2, 4/10, 4/4 -> 2.00, 0.40, 1.00 -> median 1.00.
    expect(claw[column(table, "p99 vs minimal")]).toBe("1.00x");
    // CPU: 60/50, 55/50, 70/50 -> 1.20, 1.10, 1.40 -> median 1.20.
    expect(claw[column(table, "CPU vs minimal")]).toBe("1.20x");
    // req/s: 700/900, 800/1000, 900/1100 -> 0.78, 0.80, 0.82 -> 0.80.
    expect(claw[column(table, "req/s vs minimal")]).toBe("0.80x");
  });
});
