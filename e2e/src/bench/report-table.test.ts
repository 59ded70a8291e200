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
