import { describe, expect, it } from "vitest";
import type { DataPlaneState } from "../fleet/data-plane-view.js";
import { canaryCandidates, chooseCanaries } from "./rollout-state.js";

describe("canary choice", () => {
  const fleet: { nodeId: string; state: DataPlaneState }[] = [
    { nodeId: "dp-a", state: "NACKED" },
    { nodeId: "dp-b", state: "STALE" },
    { nodeId: "dp-c", state: "SYNCING" },
    { nodeId: "dp-d", state: "DISCONNECTED" },
    { nodeId: "dp-f", state: "SYNCED" },
    { nodeId: "dp-e", state: "SYNCED" },
  ];

  it("picks only data planes serving the published version, first by node id", () => {
    expect(chooseCanaries(canaryCandidates(fleet), 1)).toEqual(["dp-e"]);
    expect(chooseCanaries(canaryCandidates(fleet), "50%")).toEqual(["dp-e"]);
    expect(chooseCanaries(canaryCandidates(fleet), 5)).toEqual(["dp-e", "dp-f"]);
  });

  it("has none when no data plane is SYNCED", () => {
    expect(canaryCandidates(fleet.filter((dp) => dp.state !== "SYNCED"))).toEqual([]);
  });
});
