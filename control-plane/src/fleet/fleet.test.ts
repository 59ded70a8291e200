import { describe, expect, it } from "vitest";
import type { DataPlaneState } from "./data-plane-view.js";
import { Fleet, type StreamToken } from "./fleet.js";

type Step =
  | { do: "publish"; version: number }
  | { do: "connect"; applied: number; stream?: string; software?: string }
  | { do: "ack"; version: number }
  | { do: "nack"; version: number; error?: string }
  | { do: "disconnect"; stream?: string }
  | { do: "advance"; ms: number };

interface Case {
  name: string;
  steps: Array<Step & { expect?: DataPlaneState }>;
}

const GRACE = 10_000;

const cases: Case[] = [
  {
    name: "a data plane that applies the published version is SYNCED",
    steps: [
      { do: "publish", version: 5 },
      { do: "connect", applied: 0, expect: "SYNCING" },
      { do: "ack", version: 5, expect: "SYNCED" },
    ],
  },
  {
    name: "one that reconnects with the published version applied is SYNCED at once",
    steps: [
      { do: "publish", version: 5 },
      { do: "connect", applied: 5, expect: "SYNCED" },
    ],
  },
  {
    name: "lagging longer than the grace period makes it STALE, catching up SYNCED",
    steps: [
      { do: "publish", version: 5 },
      { do: "connect", applied: 3, expect: "SYNCING" },
      { do: "advance", ms: GRACE - 1, expect: "SYNCING" },
      { do: "advance", ms: 1, expect: "STALE" },
      { do: "ack", version: 5, expect: "SYNCED" },
    ],
  },
  {
    name: "the grace period runs from when it fell behind, not from each new version",
    steps: [
      { do: "publish", version: 5 },
      { do: "connect", applied: 5, expect: "SYNCED" },
      { do: "advance", ms: 1_000 },
      { do: "publish", version: 6, expect: "SYNCING" },
      { do: "advance", ms: GRACE - 2_000 },
      { do: "publish", version: 7, expect: "SYNCING" },
      { do: "advance", ms: 2_000, expect: "STALE" },
      { do: "ack", version: 6, expect: "STALE" },
      { do: "ack", version: 7, expect: "SYNCED" },
    ],
  },
  {
    name: "a NACK of the published version is NACKED until a newer version is published",
    steps: [
      { do: "publish", version: 5 },
      { do: "connect", applied: 4 },
      { do: "nack", version: 5, error: "route api: bad regex", expect: "NACKED" },
      { do: "advance", ms: GRACE * 3, expect: "NACKED" },
      { do: "publish", version: 6, expect: "SYNCING" },
      { do: "ack", version: 6, expect: "SYNCED" },
    ],
  },
  {
    name: "a NACK of an older version does not make it NACKED",
    steps: [
      { do: "publish", version: 5 },
      { do: "connect", applied: 3 },
      { do: "nack", version: 4, expect: "SYNCING" },
    ],
  },
  {
    name: "reconnecting keeps the NACK unless the software changed",
    steps: [
      { do: "publish", version: 5 },
      { do: "connect", applied: 4, stream: "a", software: "1.0.0" },
      { do: "nack", version: 5, expect: "NACKED" },
      { do: "disconnect", stream: "a", expect: "DISCONNECTED" },
      { do: "connect", applied: 4, stream: "b", software: "1.0.0", expect: "NACKED" },
      { do: "disconnect", stream: "b" },
      { do: "connect", applied: 4, stream: "c", software: "1.1.0", expect: "SYNCING" },
    ],
  },
  {
    name: "an old stream closing after a reconnect does not disconnect the new one",
    steps: [
      { do: "publish", version: 5 },
      { do: "connect", applied: 5, stream: "old", expect: "SYNCED" },
      { do: "connect", applied: 5, stream: "new", expect: "SYNCED" },
      { do: "disconnect", stream: "old", expect: "SYNCED" },
      { do: "disconnect", stream: "new", expect: "DISCONNECTED" },
    ],
  },
  {
    name: "time spent disconnected does not count against the grace period",
    steps: [
      { do: "publish", version: 5 },
      { do: "connect", applied: 4, stream: "a" },
      { do: "disconnect", stream: "a" },
      { do: "advance", ms: GRACE * 2 },
      { do: "connect", applied: 4, stream: "b", expect: "SYNCING" },
      { do: "advance", ms: GRACE, expect: "STALE" },
    ],
  },
  {
    name: "with nothing published there is nothing to lag behind",
    steps: [
      { do: "connect", applied: 0, expect: "SYNCED" },
      { do: "advance", ms: GRACE * 2, expect: "SYNCED" },
      { do: "publish", version: 9, expect: "SYNCING" },
    ],
  },
];

describe("Fleet states", () => {
  for (const testCase of cases) {
    it(testCase.name, () => {
      let now = 1_000_000;
      const fleet = new Fleet({ graceMs: GRACE, clock: () => now });
      const streams = new Map<string, StreamToken>();
      testCase.steps.forEach((step, index) => {
        switch (step.do) {
          case "publish":
            fleet.setPublished(step.version);
            break;
          case "connect":
            streams.set(
              step.stream ?? "default",
              fleet.connected("dp-1", {
                hostname: "host-1",
                softwareVersion: step.software ?? "1.0.0",
                lastAppliedVersion: BigInt(step.applied),
              }),
            );
            break;
          case "ack":
            fleet.acked("dp-1", step.version);
            break;
          case "nack":
            fleet.nacked("dp-1", step.version, step.error ?? "bad");
            break;
          case "disconnect":
            fleet.disconnected("dp-1", streams.get(step.stream ?? "default")!);
            break;
          case "advance":
            now += step.ms;
            break;
        }
        if (step.expect !== undefined) {
          expect(fleet.get("dp-1")?.state, `after step ${index} (${step.do})`).toBe(step.expect);
        }
      });
    });
  }
});

describe("Fleet views", () => {
  it("lists every data plane with what it applied, its last NACK and times", () => {
    let now = Date.parse("2026-01-01T00:00:00Z");
    const fleet = new Fleet({ clock: () => now });
    fleet.setPublished(7);
    fleet.connected("dp-b", { hostname: "b", softwareVersion: "1.0.0", lastAppliedVersion: 7 });
    const a = fleet.connected("dp-a", {
      hostname: "a",
      softwareVersion: "1.0.1",
      lastAppliedVersion: 6,
    });
    now += 2_000;
    fleet.nacked("dp-a", 7, "upstream x: no nodes");

    expect(fleet.list()).toEqual([
      {
        nodeId: "dp-a",
        hostname: "a",
        softwareVersion: "1.0.1",
        connected: true,
        state: "NACKED",
        appliedVersion: 6,
        publishedVersion: 7,
        lastNack: { version: 7, error: "upstream x: no nodes", at: "2026-01-01T00:00:02.000Z" },
        lastSeen: "2026-01-01T00:00:02.000Z",
        connectedAt: "2026-01-01T00:00:00.000Z",
      },
      {
        nodeId: "dp-b",
        hostname: "b",
        softwareVersion: "1.0.0",
        connected: true,
        state: "SYNCED",
        appliedVersion: 7,
        publishedVersion: 7,
        lastSeen: "2026-01-01T00:00:00.000Z",
        connectedAt: "2026-01-01T00:00:00.000Z",
      },
    ]);
    fleet.disconnected("dp-a", a);
    expect(fleet.counts()).toEqual({ SYNCED: 1, SYNCING: 0, STALE: 0, NACKED: 0, DISCONNECTED: 1 });
  });

  it("forgets a data plane disconnected for longer than forgetAfterMs", () => {
    let now = 0;
    const fleet = new Fleet({ clock: () => now, forgetAfterMs: 60_000 });
    const token = fleet.connected("dp-1", {
      hostname: "h",
      softwareVersion: "1",
      lastAppliedVersion: 0,
    });
    fleet.disconnected("dp-1", token);
    now = 59_999;
    expect(fleet.list().map((view) => view.state)).toEqual(["DISCONNECTED"]);
    now = 60_000;
    expect(fleet.list()).toEqual([]);
    expect(fleet.counts().DISCONNECTED).toBe(0);
  });

  it("refuses to resend only the version that this software NACKed", () => {
    const fleet = new Fleet();
    fleet.connected("dp-1", { hostname: "h", softwareVersion: "1", lastAppliedVersion: 0 });
    fleet.nacked("dp-1", 5, "bad");
    expect(fleet.refused("dp-1", 5)).toBe(true);
    expect(fleet.refused("dp-1", 6)).toBe(false);
    expect(fleet.refused("dp-2", 5)).toBe(false);
  });
});
