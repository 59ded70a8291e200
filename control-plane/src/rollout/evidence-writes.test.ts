import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SnapshotPublisher } from "../grpc/snapshot-publisher.js";
import { ConfigHistory } from "../history/config-history.js";
import type { DataPlaneRecord } from "../replicas/data-plane-record.js";
import { ConfigService } from "../resources/config-service.js";
import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store, WatchEvent } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { syncedFleet } from "../testing/synced-fleet.js";
import { OutcomeBoard } from "./outcome-board.js";
import { RolloutController } from "./rollout-controller.js";
import { rolloutSpecSchema } from "./rollout-state.js";

// Real etcd: what is bounded is the number of revisions etcd keeps for the evidence key.
let etcd: EtcdProcess;
let store: Store;
beforeAll(async () => {
  etcd = await startEtcd();
  store = await openEtcdStore({ endpoints: [etcd.endpoint] });
});
afterAll(async () => {
  await store?.close();
  await etcd?.stop();
});

const quiet = { info() {}, warn() {}, error() {} };
const spec = rolloutSpecSchema.parse({ canary: 1, bakeSeconds: 3600, minRequests: 20 });
const EVERY_MS = 10_000;
const CHECK_MS = 500;

/** The base version every test rolls out from, as published. */
const BASE = { version: 1 } as PublishedSnapshot;
const builder: SnapshotPublisher = { current: () => BASE, onPublish: () => () => undefined };

/**
 * dp-a (the canary) reports `served.canary` requests on the version rolled out (once known),
 * dp-b (the rest) none, on the base.
 */
function reports() {
  const served = { canary: 0, rolledOut: Number.POSITIVE_INFINITY };
  const record = (version: number, requests: number): DataPlaneRecord => ({
    changedAtMs: 0,
    outcomes: [{ version, requests, failures: 0 }],
    breakers: [],
  });
  const board = new OutcomeBoard({
    nodes: () => ["dp-a", "dp-b"],
    get: (nodeId) =>
      nodeId === "dp-a" ? record(served.rolledOut, served.canary) : record(BASE.version, 0),
  });
  return { served, board };
}

let prefixes = 0;

/** A leader's rollout controller whose checks and clock the test steps. */
async function leader(prefix: string, board: OutcomeBoard, clock: { now: number }) {
  const config = new ConfigService(store, prefix);
  const history = new ConfigHistory({ store, prefix });
  await history.start();
  const controller = new RolloutController({
    store,
    prefix,
    config,
    history,
    builder,
    fleet: { list: () => syncedFleet("dp-a", "dp-b") },
    board,
    election: { isLeader: () => true },
    logger: quiet,
    // Never on its own: the test runs each check.
    tickMs: 3_600_000,
    evidenceWriteMs: EVERY_MS,
    clock: () => clock.now,
  });
  await controller.start();
  return { controller, config };
}

/** Every put to the evidence key since `fromRevision`, read back through an etcd watch. */
async function evidencePuts(prefix: string, fromRevision: number): Promise<WatchEvent[]> {
  const key = `${prefix}rollout/evidence`;
  // A key after it under the same watched prefix: once its event is in, every earlier one is.
  const end = `${key}~end`;
  await store.commit([], [{ type: "put", key: end, value: "" }]);
  const events: WatchEvent[] = [];
  let resolve = () => {};
  const done = new Promise<void>((r) => {
    resolve = r;
  });
  const watch = await store.watch(key, fromRevision, {
    onEvents(batch) {
      for (const event of batch) {
        if (event.key === end) resolve();
        else if (event.key === key && event.type === "put") events.push(event);
      }
    },
  });
  await done;
  await watch.close();
  return events;
}

const canaryTotal = (event: WatchEvent) => {
  const tally = (
    JSON.parse(event.value ?? "{}") as {
      tallies: Record<string, { banked: { requests: number }; last: { requests: number } }>;
    }
  ).tallies["dp-a"];
  return (tally?.banked.requests ?? 0) + (tally?.last.requests ?? 0);
};

describe("evidence ledger writes on etcd", () => {
  it("writes on a verdict change or every evidenceWriteMs, and a new leader resumes from the last write", async () => {
    const prefix = `/evidence-writes-${++prefixes}-${Date.now()}/`;
    const { served, board } = reports();
    const clock = { now: Date.parse("2026-01-01T00:00:00Z") };
    const a = await leader(prefix, board, clock);
    const started = await a.controller.apply(spec, "ci", (also) =>
      a.config.apply(
        [{ kind: "upstreams", name: "agents", document: { nodes: [{ address: "127.0.0.1:9" }] } }],
        { alsoWrite: () => also },
      ),
    );
    if (!started.ok) throw new Error(started.error.message);
    served.rolledOut = started.revision;

    // 45 checks, twice a second, each after the canary served one more request: the ledger
    // changes at every one of them.
    for (let check = 1; check <= 45; check++) {
      clock.now += CHECK_MS;
      served.canary = check;
      await a.controller.check();
    }
    // Written at the first check (no verdict written yet), at the 20th (minRequests reached:
    // inconclusive -> passing) and at the 40th (EVERY_MS after the 20th); not at the other 42.
    const puts = await evidencePuts(prefix, started.revision + 1);
    expect(puts.map(canaryTotal)).toEqual([1, 20, 40]);

    // The leader dies; the canary restarts (counting from zero again) before the new leader's
    // first check, which finds the evidence of the 40th check and banks it.
    a.controller.stop();
    served.canary = 5;
    const b = await leader(prefix, board, clock);
    await b.controller.check();
    expect(b.controller.view()?.outcomes.canary.requests).toBe(40 + 5);

    // An ending writes the evidence it was decided on before it commits, whatever the pace.
    served.canary = 7;
    const promoted = await b.controller.promote("alice");
    if (!promoted.ok) throw new Error(promoted.error.message);
    const last = (await evidencePuts(prefix, started.revision + 1)).at(-1);
    expect(last === undefined ? undefined : canaryTotal(last)).toBe(40 + 7);
    b.controller.stop();
    await a.config.close();
    await b.config.close();
  });
});
