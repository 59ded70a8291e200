import { describe, expect, it } from "vitest";
import { DataPlaneRecords } from "../replicas/data-plane-records.js";
import { OutcomeBoard } from "./outcome-board.js";

describe("OutcomeBoard", () => {
  const records = new DataPlaneRecords({ prefix: "/t/", replicaId: "cp-1" });
  records.connected("dp-a");
  records.connected("dp-b");
  // dp-a was sent the rolled-out config (applied at revision 8) as version 9: another write
  // moved the revision before the snapshot was built.
  records.outcomes("dp-a", [
    { version: 5, requests: 7, failures: 0 },
    { version: 9, requests: 20, failures: 20 },
  ]);
  const board = new OutcomeBoard(records);

  it.each([
    [
      "every version from the rolled-out one on",
      "dp-a",
      8,
      undefined,
      { requests: 20, failures: 20 },
    ],
    ["the versions before it", "dp-a", 5, 8, { requests: 7, failures: 0 }],
    ["a data plane that reported nothing yet", "dp-b", 0, undefined, { requests: 0, failures: 0 }],
    ["a data plane no replica has", "dp-z", 0, undefined, { requests: 0, failures: 0 }],
  ])("sums %s", (_name, node, from, to, counts) => {
    expect(board.of(node, from, to)).toEqual(counts);
  });

  it("tells a NACK of the version rolled out (or later) from one of an earlier version", () => {
    const nacking = new DataPlaneRecords({ prefix: "/t/", replicaId: "cp-1" });
    nacking.status("dp-a", {
      hostname: "a",
      softwareVersion: "1",
      appliedVersion: 5,
      connectedAtMs: 0,
      lastNack: { version: 9, error: "bad caFile", atMs: 1 },
      publishedVersion: 9,
    });
    const nacks = new OutcomeBoard(nacking);
    expect(nacks.refused("dp-a", 8)).toEqual({ version: 9, error: "bad caFile" });
    expect(nacks.refused("dp-a", 10)).toBeUndefined();
    expect(nacks.refused("dp-z", 0)).toBeUndefined();
  });

  it("lists connected data planes, reported or not", () => {
    expect(board.nodes()).toEqual(["dp-a", "dp-b"]);
  });
});
