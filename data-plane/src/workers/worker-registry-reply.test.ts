import { SnapshotDeltaSchema, SnapshotSchema, toBinary } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../config/load-config.js";
import { deltaOf, snapshotOf } from "../testing/delta-fixture.js";
import { type InProcessWorker, startInProcessWorker } from "../testing/in-process-worker.js";
import { plainRequest } from "../testing/plain-request.js";

function startWorker(): Promise<InProcessWorker> {
  return startInProcessWorker(
    loadConfig({
      argv: ["--proxy-listen=127.0.0.1:0"],
      env: { CLAWGATE_LOG_LEVEL: "silent", CLAWGATE_ACCESS_LOG: "off" },
    }),
  );
}

/** The route label values of a worker's metrics reply. */
async function routesInReply(worker: InProcessWorker, id: number): Promise<Set<string>> {
  worker.send({ type: "clawgate:metrics", id });
  const reply = await worker.reply("clawgate:metrics-reply");
  const routes = new Set<string>();
  for (const family of reply.metrics as { values: { labels: Record<string, unknown> }[] }[]) {
    for (const series of family.values) {
      if (series.labels.route !== undefined) routes.add(String(series.labels.route));
    }
  }
  return routes;
}

describe("a proxy worker's metrics reply", () => {
  it("no longer lists a route a committed delta removed, and keeps the others", async () => {
    const worker = await startWorker();
    try {
      const init = Buffer.from(toBinary(SnapshotSchema, snapshotOf(1, 10, 5))).toString("base64");
      worker.send({ type: "clawgate:init", snapshot: init, unusable: [] });
      const { address } = await worker.reply("clawgate:listening");
      const port = Number(address.slice(address.lastIndexOf(":") + 1));
      // r-0 and r-5 (path prefixes /api/v0/s0 and /api/v2/s5): their nodes refuse, which still
      // counts the request under its route.
      await plainRequest(port, "/api/v0/s0/x");
      await plainRequest(port, "/api/v2/s5/x");
      expect(await routesInReply(worker, 1)).toEqual(new Set(["r-0", "r-5"]));

      const delta = deltaOf(2, { removedRoutes: ["r-0"] });
      const bytes = Buffer.from(toBinary(SnapshotDeltaSchema, delta)).toString("base64");
      worker.send({ type: "clawgate:prepare", id: 1, update: { kind: "delta", bytes } });
      expect(await worker.reply("clawgate:prepared")).toMatchObject({ id: 1, ok: true });
      worker.send({ type: "clawgate:commit", id: 1 });
      await worker.reply("clawgate:committed");

      expect(await routesInReply(worker, 2)).toEqual(new Set(["r-5"]));
    } finally {
      await worker.stop();
    }
  });

  it("is rendered a family per event-loop turn, letting other callbacks run in between", async () => {
    const worker = await startWorker();
    try {
      worker.send({ type: "clawgate:metrics", id: 1 });
      // Queued before the render's first turn ends: it runs before the reply only if the
      // render yields the event loop between families.
      let ranMeanwhile = false;
      setImmediate(() => {
        ranMeanwhile = true;
      });
      const reply = await worker.reply("clawgate:metrics-reply");
      expect(reply.metrics.length).toBeGreaterThan(1);
      expect(ranMeanwhile).toBe(true);
    } finally {
      await worker.stop();
    }
  });
});
