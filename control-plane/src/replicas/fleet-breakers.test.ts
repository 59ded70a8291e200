import { describe, expect, it } from "vitest";
import { DataPlaneRecords } from "./data-plane-records.js";
import { type BreakerChange, FleetBreakers } from "./fleet-breakers.js";

describe("FleetBreakers", () => {
  it("lists each data plane's breakers of an upstream and tells what changed", () => {
    const records = new DataPlaneRecords({ prefix: "/t/", replicaId: "cp-1" });
    const breakers = new FleetBreakers(records);
    const changes: BreakerChange[] = [];
    breakers.onChange((change) => changes.push(change));
    records.connected("dp-b");
    records.connected("dp-a");
    const opened = {
      upstream: "api",
      state: "open" as const,
      sinceMs: 1_000,
      cooldownUntilMs: 31_000,
    };
    records.breakers("dp-b", [opened]);
    records.breakers("dp-a", [opened]);
    // Outcomes change the record, not the breakers: nothing to tell.
    records.outcomes("dp-a", [{ version: 3, requests: 1, failures: 1 }]);
    expect(breakers.upstream("api")).toEqual([
      {
        dataPlane: "dp-a",
        state: "open",
        since: "1970-01-01T00:00:01.000Z",
        cooldownUntil: "1970-01-01T00:00:31.000Z",
      },
      {
        dataPlane: "dp-b",
        state: "open",
        since: "1970-01-01T00:00:01.000Z",
        cooldownUntil: "1970-01-01T00:00:31.000Z",
      },
    ]);
    expect(changes.map((c) => `${c.dataPlane} ${c.upstream} ${c.state}`)).toEqual([
      "dp-b api open",
      "dp-a api open",
    ]);

    // Closed on dp-a (no longer listed); dp-b leaves: closed there too as far as anyone knows.
    records.breakers("dp-a", []);
    records.disconnected("dp-b");
    expect(breakers.upstream("api")).toEqual([]);
    expect(changes.slice(2).map((c) => `${c.dataPlane} ${c.upstream} ${c.state}`)).toEqual([
      "dp-a api closed",
      "dp-b api closed",
    ]);
  });
});
