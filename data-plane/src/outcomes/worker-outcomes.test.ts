import { describe, expect, it } from "vitest";
import { VersionOutcomes } from "./version-outcomes.js";
import { WorkerOutcomes } from "./worker-outcomes.js";

describe("WorkerOutcomes", () => {
  it("sums the workers' counts per version into one report", () => {
    const one = new VersionOutcomes();
    const two = new VersionOutcomes();
    for (const worker of [one, two]) worker.serving(7);
    for (const status of [200, 500]) one.record(status);
    two.record(503);
    const summed = new WorkerOutcomes();
    expect(summed.takeReport()).toBeUndefined();
    summed.reported(1, one.takeCounts()!);
    summed.reported(2, two.takeCounts()!);
    expect(summed.takeReport()).toEqual([{ version: 7n, requests: 3n, failures: 2n }]);
    // Nothing new from any worker: nothing to send.
    expect(summed.takeReport()).toBeUndefined();
    // Cumulative: a worker's newer counts replace its older ones, never add to them.
    one.record(200);
    summed.reported(1, one.takeCounts()!);
    expect(summed.takeReport()).toEqual([{ version: 7n, requests: 4n, failures: 2n }]);
  });

  it("keeps a worker's counts after it is gone, so the total never shrinks", () => {
    const summed = new WorkerOutcomes();
    summed.reported(1, [{ version: 7, requests: 10, failures: 4 }]);
    // Worker 1 died; its replacement (a new id) starts from zero on the same version.
    summed.reported(3, [{ version: 7, requests: 1, failures: 0 }]);
    expect(summed.takeReport()).toEqual([{ version: 7n, requests: 11n, failures: 4n }]);
  });

  it("reports the three newest versions across workers", () => {
    const summed = new WorkerOutcomes();
    summed.reported(1, [
      { version: 1, requests: 1, failures: 0 },
      { version: 2, requests: 1, failures: 0 },
    ]);
    summed.reported(2, [
      { version: 3, requests: 1, failures: 1 },
      { version: 4, requests: 2, failures: 0 },
    ]);
    expect(summed.takeReport()?.map((v) => v.version)).toEqual([2n, 3n, 4n]);
  });
});
