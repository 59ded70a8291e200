import { SnapshotDeltaSchema, SnapshotSchema, toBinary } from "@clawgate/proto";
import { afterEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../config/load-config.js";
import { RequestHealing } from "../proxy/request-healing.js";
import { deltaOf, routeAt, snapshotOf, upstreamAt } from "../testing/delta-fixture.js";
import { startInProcessWorker } from "../testing/in-process-worker.js";
import { PoolRegistry } from "../upstream/pool-registry.js";

// Issue 9's size: 10,000 routes over 2,000 upstreams of 10 nodes each, 20,000 nodes.
const ROUTES = 10_000;
const UPSTREAMS = 2_000;
const NODES = 10;

function bigSnapshot(version: number): string {
  const snapshot = snapshotOf(version, ROUTES, UPSTREAMS);
  snapshot.upstreams = Array.from({ length: UPSTREAMS }, (_, i) => upstreamAt(i, NODES));
  return Buffer.from(toBinary(SnapshotSchema, snapshot)).toString("base64");
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("a proxy worker's after-swap", () => {
  it("follows a one-route delta on 20,000 nodes by what it changed, not by every upstream", async () => {
    const retain = vi.spyOn(PoolRegistry.prototype, "retain");
    const sync = vi.spyOn(RequestHealing.prototype, "sync");
    const syncInTurns = vi.spyOn(RequestHealing.prototype, "syncInTurns");
    const syncChanged = vi.spyOn(RequestHealing.prototype, "syncChanged");
    /** Upstreams given a new record by every sync since the spies were last cleared. */
    const upstreamsSynced = () =>
      [...sync.mock.calls, ...syncInTurns.mock.calls].reduce(
        (sum, [snapshot]) => sum + snapshot.upstreams.size,
        0,
      ) +
      syncChanged.mock.calls.reduce(
        (sum, [, , changed], i) =>
          sum + (syncChanged.mock.results[i]?.value ? [...changed].length : 0),
        0,
      );

    const worker = await startInProcessWorker(
      loadConfig({ argv: ["--proxy-listen=127.0.0.1:0"], env: { CLAWGATE_LOG_LEVEL: "silent" } }),
    );
    try {
      worker.send({ type: "clawgate:init", snapshot: bigSnapshot(1), unusable: [] });
      await worker.reply("clawgate:listening");
      // A whole snapshot: every upstream gets its record, over turns after the swap's.
      expect(upstreamsSynced()).toBe(UPSTREAMS);
      await Promise.all(syncInTurns.mock.results.map((result) => result.value));
      for (const spy of [retain, sync, syncInTurns, syncChanged]) spy.mockClear();

      // Route r-7 (to u-7) changes its priority and nothing else.
      const delta = deltaOf(2, { routes: [routeAt(7, UPSTREAMS, 1)] });
      const bytes = Buffer.from(toBinary(SnapshotDeltaSchema, delta)).toString("base64");
      worker.send({ type: "clawgate:prepare", id: 1, update: { kind: "delta", bytes } });
      expect(await worker.reply("clawgate:prepared")).toMatchObject({ id: 1, ok: true });
      worker.send({ type: "clawgate:commit", id: 1 });
      await worker.reply("clawgate:committed");

      // No upstream changed: none of the 2,000 gets a new record, none is walked.
      expect(upstreamsSynced()).toBe(0);
      expect(syncChanged).toHaveReturnedWith(true);
      // Only the pools of r-7's nodes are checked, not the 20,000 nodes' pools.
      expect(retain).toHaveBeenCalledTimes(1);
      const only = retain.mock.calls[0]![1];
      expect([...(only ?? ["every address"])].sort()).toEqual(
        upstreamAt(7, NODES)
          .nodes.map((node) => node.address)
          .sort(),
      );
    } finally {
      await worker.stop();
    }
  });
});
