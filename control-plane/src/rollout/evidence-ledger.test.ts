import { describe, expect, it } from "vitest";
import { EvidenceLedger } from "./evidence-ledger.js";
import type { Counts } from "./rollout-verdict.js";

const c = (requests: number, failures = 0): Counts => ({ requests, failures });

describe("EvidenceLedger", () => {
  // Each step: the data plane's latest cumulative counts (undefined: no record, disconnected),
  // and what the ledger holds it served after that step.
  it.each<[string, (Counts | undefined)[], Counts]>([
    ["reports growing", [c(5), c(12, 1)], c(12, 1)],
    ["a disconnect keeps what it served", [c(12, 2), undefined], c(12, 2)],
    ["a reconnect of the same process goes on counting", [c(12), undefined, c(15)], c(15)],
    [
      "a restart counting from zero adds to what it served",
      [c(12, 3), undefined, c(4, 1)],
      c(16, 4),
    ],
    ["two restarts", [c(10), c(2), c(1), c(6)], c(18)],
    ["never seen", [], c(0)],
  ])("%s", (_name, reports, total) => {
    const ledger = new EvidenceLedger("r1");
    for (const report of reports) ledger.observe("dp-a", report);
    expect(ledger.total("dp-a")).toEqual(total);
  });

  it("counts the rest from its baseline, a restart included", () => {
    const ledger = new EvidenceLedger("r1");
    ledger.start("dp-b", c(100, 5));
    ledger.observe("dp-b", c(110, 5));
    ledger.observe("dp-b", c(3, 1));
    // 110 before the restart and 3 after, of which 100 before the rollout.
    expect(ledger.total("dp-b")).toEqual(c(113, 6));
    ledger.start("dp-b", c(0));
    expect(ledger.total("dp-b")).toEqual(c(113, 6));
  });

  it("is carried on from the store by the rollout it belongs to only", () => {
    const ledger = new EvidenceLedger("r1");
    ledger.observe("dp-a", c(12, 3));
    ledger.observe("dp-a", c(2));
    const stored = JSON.stringify(ledger);
    expect(EvidenceLedger.parse(stored, "r1")?.total("dp-a")).toEqual(c(14, 3));
    expect(EvidenceLedger.parse(stored, "r2")).toBeUndefined();
    expect(EvidenceLedger.parse("not json", "r1")).toBeUndefined();
    expect(EvidenceLedger.parse(undefined, "r1")).toBeUndefined();
  });
});
