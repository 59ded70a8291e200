import { describe, expect, it } from "vitest";
import { VersionOutcomes } from "./version-outcomes.js";

describe("VersionOutcomes", () => {
  it("counts requests and 5xx under the version served, leaving 499 out", () => {
    const outcomes = new VersionOutcomes();
    outcomes.record(200);
    expect(outcomes.takeReport()).toBeUndefined();
    outcomes.serving(7);
    for (const status of [200, 404, 502, 503, 499]) outcomes.record(status);
    outcomes.serving(9);
    outcomes.record(500);
    expect(outcomes.takeReport()).toEqual([
      { version: 7n, requests: 4n, failures: 2n },
      { version: 9n, requests: 1n, failures: 1n },
    ]);
    expect(outcomes.takeReport()).toBeUndefined();
  });

  it("keeps the three newest versions", () => {
    const outcomes = new VersionOutcomes();
    for (const version of [1, 2, 3, 4]) outcomes.serving(version);
    expect(outcomes.takeReport()?.map((v) => v.version)).toEqual([2n, 3n, 4n]);
  });
});
