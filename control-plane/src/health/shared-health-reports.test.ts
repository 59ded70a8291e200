import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { Fleet, type ReportedNodeHealth } from "../fleet/fleet.js";
import type { HealEventInput } from "../journal/heal-event.js";
import { ManualScheduler } from "../remediation/manual-scheduler.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store, WatchEvent, WatchHandlers } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/index.js";
import { recordingJournal } from "../testing/recording-journal.js";
import { FleetHealth, type NodeHealthSummary } from "./fleet-health.js";
import { healthReportKey, parseHealthReportKey } from "./health-report-key.js";
import { type SharedHealthHandlers, SharedHealthReports } from "./shared-health-reports.js";
import { encodeHealthReport, parseHealthReport } from "./stored-health-report.js";

const PREFIX = "/clawgate-health-test/";
const A = "10.0.0.1:9001";
const HELLO = { hostname: "h", softwareVersion: "1", lastAppliedVersion: 0 };
/** Waits are on events; this only turns a hang into a readable failure. */
const WAIT_MS = 10_000;

function node(state: string, evidence = ""): ReportedNodeHealth {
  return { upstream: "agents", address: A, state, evidence, changedAtMs: 1_700_000_000_000n };
}

interface ReplicaOptions {
  coalesceMs?: number;
  leaseTtlSeconds?: number;
  reconnectGraceMs?: number;
}

/** Where the replicas' stores come from: one shared embedded store, or one etcd client each. */
interface Stores {
  /** The store one replica uses. */
  open(): Promise<Store>;
  /** A store for the test's own reads and writes. */
  raw: Store;
}

/** Resolves once `predicate` holds, re-checked after every change of `health`'s view. */
function until(health: FleetHealth, what: string, predicate: () => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`timed out waiting for ${what}`));
    }, WAIT_MS);
    const off = health.onUpdate(() => {
      if (!predicate()) return;
      clearTimeout(timer);
      off();
      resolve();
    });
    if (predicate()) {
      clearTimeout(timer);
      off();
      resolve();
    }
  });
}

function counts(summary: NodeHealthSummary | undefined) {
  if (summary === undefined) return undefined;
  const { healthy, quarantined, evicted, total, majority } = summary;
  return { healthy, quarantined, evicted, total, majority };
}

/** Records journal events of every replica in one list, as the shared journal would hold them. */
function journalOf(recorded: HealEventInput[]) {
  return recordingJournal(recorded).journal;
}

function describeSharing(
  kind: string,
  setup: () => Promise<Stores>,
  teardown: () => Promise<void>,
) {
  describe(`shared fleet health (${kind} store)`, () => {
    let stores: Stores;
    const cleanups: Array<() => Promise<void>> = [];
    const recorded: HealEventInput[] = [];

    beforeAll(async () => {
      stores = await setup();
    });
    afterAll(teardown);
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
      recorded.length = 0;
      const left = await stores.raw.range(`${PREFIX}meta/health/`);
      for (const item of left.items) {
        await stores.raw.commit([], [{ type: "delete", key: item.key }]);
      }
    });

    /** One control-plane replica: its own fleet, store client and view; the journal is shared. */
    async function replica(id: string, options: ReplicaOptions = {}) {
      const store = await stores.open();
      const fleet = new Fleet();
      const shared = new SharedHealthReports({
        store,
        prefix: PREFIX,
        replicaId: id,
        coalesceMs: options.coalesceMs ?? 100,
        leaseTtlSeconds: options.leaseTtlSeconds ?? 10,
        retryMs: 10,
      });
      const health = new FleetHealth({
        fleet,
        journal: journalOf(recorded),
        shared,
        reconnectGraceMs: options.reconnectGraceMs ?? 30_000,
      });
      await health.start();
      let closed = false;
      const close = async () => {
        if (closed) return;
        closed = true;
        await health.close();
        if (store !== stores.raw) await store.close();
      };
      cleanups.push(close);
      return {
        health,
        close,
        /** A data plane's stream to this replica. */
        connect(dataPlane: string) {
          const stream = fleet.connected(dataPlane, HELLO);
          return {
            report: (...nodes: ReportedNodeHealth[]) =>
              fleet.healthReported(dataPlane, stream, nodes),
            disconnect: () => fleet.disconnected(dataPlane, stream),
          };
        },
      };
    }

    async function stored(dataPlane: string) {
      const kv = await stores.raw.get(healthReportKey(PREFIX, dataPlane));
      if (kv === undefined) return undefined;
      const parsed = await parseHealthReport(dataPlane, kv.value);
      if (!parsed.ok) throw new Error(parsed.reason);
      return { ...parsed.report, lease: kv.lease };
    }

    it("shows every data plane on both replicas, and journals each change once", async () => {
      const one = await replica("cp-1");
      const two = await replica("cp-2");
      const a = one.connect("dp-a");
      const b = two.connect("dp-b");

      a.report(node("healthy", "200 ok"));
      b.report(node("quarantined", "connect ECONNREFUSED"));
      for (const r of [one, two]) {
        await until(
          r.health,
          "both data planes' reports",
          () => r.health.node("agents", A)?.total === 2,
        );
        expect(counts(r.health.node("agents", A))).toEqual({
          healthy: 1,
          quarantined: 1,
          evicted: 0,
          total: 2,
          majority: "split",
        });
      }

      const verdicts: string[] = [];
      one.health.onVerdict((change) => verdicts.push(`cp-1 ${change.majority}`));
      two.health.onVerdict((change) => verdicts.push(`cp-2 ${change.majority}`));
      a.report(node("evicted", "2 probe failures"));
      b.report(node("evicted", "2 probe failures"));
      for (const r of [one, two]) {
        await until(
          r.health,
          "the eviction on both",
          () => r.health.node("agents", A)?.evicted === 2,
        );
        expect(r.health.node("agents", A)?.reports.map((x) => [x.dataPlane, x.state])).toEqual([
          ["dp-a", "evicted"],
          ["dp-b", "evicted"],
        ]);
      }
      // The remediation leader, whichever replica it is, sees the majority evict the node.
      expect(verdicts.sort()).toEqual(["cp-1 evicted", "cp-2 evicted"]);
      expect(one.health.nodesWhere("evicted").map((n) => n.address)).toEqual([A]);
      expect(two.health.nodesWhere("evicted").map((n) => n.address)).toEqual([A]);

      // Only the replica that received a report journals it: nothing twice.
      expect(recorded.map((e) => [e.source, e.action])).toEqual([
        ["dp-b", "quarantine"],
        ["dp-a", "evict"],
        ["dp-b", "evict"],
      ]);

      const value = await stored("dp-a");
      expect(value).toMatchObject({
        replica: "cp-1",
        nodes: [
          { upstream: "agents", address: A, state: "evicted", changedAtMs: 1_700_000_000_000 },
        ],
      });
      expect(value?.lease).toBeDefined();
      expect((await stored("dp-b"))?.replica).toBe("cp-2");
    });

    it("writes at most one report per data plane per interval; the last one wins", async () => {
      const store = await stores.open();
      const puts: string[] = [];
      // Time moves only when the test steps it, so "waited out the interval" is an order of
      // events, not a duration measured on a busy machine.
      const pacer = new ManualScheduler();
      const counting: Store = {
        ...store,
        kind: store.kind,
        commit(compares, operations) {
          for (const op of operations) {
            if (op.type !== "put") continue;
            puts.push(op.key);
          }
          return store.commit(compares, operations);
        },
      };
      const shared = new SharedHealthReports({
        store: counting,
        prefix: PREFIX,
        replicaId: "cp-1",
        coalesceMs: 200,
        pacer,
      });
      const fleet = new Fleet();
      const health = new FleetHealth({ fleet, journal: journalOf(recorded), shared });
      await health.start();
      cleanups.push(async () => {
        await health.close();
        if (store !== stores.raw) await store.close();
      });
      const reader = await replica("cp-2");
      const stream = fleet.connected("dp-a", HELLO);
      const states = ["healthy", "quarantined", "evicted", "evicted", "healthy"];
      for (const [i, state] of states.entries()) {
        fleet.healthReported("dp-a", stream, [node(state, `report ${i}`)]);
      }
      // The first goes out at once; once it is written, the next waits for the interval.
      await until(
        reader.health,
        "the first report",
        () => reader.health.node("agents", A)?.reports[0]?.evidence === "report 0",
      );
      await vi.waitFor(() => expect(pacer.pending()).toBe(1));
      expect(pacer.nextAt()).toBe(200);
      pacer.advance(199);
      expect(puts).toHaveLength(1);
      pacer.advance(1);
      await until(
        reader.health,
        "the last report",
        () => reader.health.node("agents", A)?.reports[0]?.evidence === "report 4",
      );
      // The other four collapsed into one write of the last.
      expect(puts).toEqual([healthReportKey(PREFIX, "dp-a"), healthReportKey(PREFIX, "dp-a")]);
      // Every change the data plane reported is journaled, written or not.
      expect(recorded.map((e) => e.action)).toEqual(["quarantine", "evict", "readmit"]);
    });

    it("withdraws a data plane gone for good after the grace, not one that moved", async () => {
      const one = await replica("cp-1", { reconnectGraceMs: 50 });
      const two = await replica("cp-2", { reconnectGraceMs: 50 });
      const a1 = one.connect("dp-a");
      const b1 = one.connect("dp-b");
      a1.report(node("evicted", "refused"));
      b1.report(node("healthy"));
      await until(two.health, "both reports", () => two.health.node("agents", A)?.total === 2);

      // dp-a moves to cp-2 and sends its view again: the same state is no new event.
      a1.disconnect();
      const a2 = two.connect("dp-a");
      a2.report(node("evicted", "still refused"));
      await until(
        one.health,
        "cp-2's report of dp-a",
        () =>
          one.health.node("agents", A)?.reports.find((x) => x.dataPlane === "dp-a")?.evidence ===
          "still refused",
      );
      // dp-b leaves for good; its disconnect comes after dp-a's, so its grace ends later.
      b1.disconnect();
      for (const r of [one, two]) {
        await until(r.health, "dp-b withdrawn", () => r.health.node("agents", A)?.total === 1);
        expect(r.health.node("agents", A)?.reports.map((x) => x.dataPlane)).toEqual(["dp-a"]);
      }
      expect((await stored("dp-a"))?.replica).toBe("cp-2");
      expect(await stored("dp-b")).toBeUndefined();
      expect(recorded.map((e) => [e.source, e.action])).toEqual([["dp-a", "evict"]]);
    });

    it("drops a replica's reports when its lease expires", async () => {
      const one = await replica("cp-1", { leaseTtlSeconds: 1 });
      const two = await replica("cp-2");
      one.connect("dp-a").report(node("evicted"));
      two.connect("dp-b").report(node("evicted"));
      await until(two.health, "both reports", () => two.health.node("agents", A)?.total === 2);

      // cp-1 stops keeping its lease alive, as a crashed replica would.
      await one.close();
      await until(
        two.health,
        "dp-a's report expiring",
        () => two.health.node("agents", A)?.total === 1,
      );
      expect(two.health.node("agents", A)?.reports.map((x) => x.dataPlane)).toEqual(["dp-b"]);
      expect(await stored("dp-a")).toBeUndefined();
    });

    it("writes its reports again on a new lease when the old one is lost", async () => {
      const one = await replica("cp-1", { leaseTtlSeconds: 1 });
      const two = await replica("cp-2");
      one.connect("dp-a").report(node("quarantined"));
      await until(two.health, "dp-a's report", () => two.health.node("agents", A) !== undefined);
      const before = await stored("dp-a");
      const gone = until(
        two.health,
        "the report gone",
        () => two.health.node("agents", A) === undefined,
      );
      await stores.raw.revokeLease(before?.lease as string);
      await gone;
      await until(two.health, "the report back", () => two.health.node("agents", A) !== undefined);
      const after = await stored("dp-a");
      expect(after).toMatchObject({ replica: "cp-1", nodes: [{ state: "quarantined" }] });
      expect(after?.lease).not.toBe(before?.lease);
      // Written again, not reported again: no second journal event.
      expect(recorded.map((e) => e.action)).toEqual(["quarantine"]);
    });
  });
}

describeSharing(
  "embedded",
  async () => {
    const store = await openEmbeddedStore({});
    embedded = store;
    return { open: async () => store, raw: store };
  },
  async () => {
    await embedded?.close();
  },
);
let embedded: Store | undefined;

let etcd: EtcdProcess | undefined;
let etcdRaw: Store | undefined;
describeSharing(
  "etcd",
  async () => {
    etcd = await startEtcd();
    const endpoints = [(etcd as EtcdProcess).endpoint];
    etcdRaw = await openEtcdStore({ endpoints });
    return { open: () => openEtcdStore({ endpoints }), raw: etcdRaw };
  },
  async () => {
    await etcdRaw?.close();
    await etcd?.stop();
  },
);

describe("SharedHealthReports", () => {
  let store: Store;
  beforeAll(async () => {
    store = await openEmbeddedStore({});
  });
  afterAll(async () => {
    await store.close();
  });

  /** Handlers that hand over each report, and each move, to whoever waits for it. */
  function listening() {
    const waiting: Array<(event: string) => void> = [];
    const handlers: SharedHealthHandlers = {
      onReset: () => undefined,
      onReport: (report) => {
        for (const w of waiting) w(`report ${report.dataPlane} ${report.replica}`);
      },
      onGone: (dataPlane) => {
        for (const w of waiting) w(`gone ${dataPlane}`);
      },
      onMoved: (dataPlane) => {
        for (const w of waiting) w(`moved ${dataPlane}`);
      },
    };
    const next = (event: string) =>
      new Promise<void>((resolve) => {
        const w = (seen: string) => {
          if (seen !== event) return;
          waiting.splice(waiting.indexOf(w), 1);
          resolve();
        };
        waiting.push(w);
      });
    return { handlers, next };
  }

  it("withdraws only a report it wrote itself", async () => {
    const { handlers, next } = listening();
    const shared = new SharedHealthReports({
      store,
      prefix: PREFIX,
      replicaId: "cp-1",
      coalesceMs: 0,
    });
    await shared.start(handlers);
    const key = (id: string) => healthReportKey(PREFIX, id);

    const writtenX = next("report dp-x cp-1");
    const writtenY = next("report dp-y cp-1");
    shared.publish("dp-x", [node("healthy")]);
    shared.publish("dp-y", [node("healthy")]);
    await Promise.all([writtenX, writtenY]);
    // Another replica writes dp-x now (received earlier than cp-1's, so it does not move it).
    const overwritten = next("report dp-x cp-2");
    await store.commit(
      [],
      [
        {
          type: "put",
          key: key("dp-x"),
          value: await encodeHealthReport({ replica: "cp-2", reportedAtMs: 0, nodes: [] }),
        },
      ],
    );
    await overwritten;
    shared.withdraw("dp-x");
    shared.withdraw("dp-y");
    // stop() waits for the deletes under way (coalesceMs 0: both start at once).
    await shared.stop();
    expect(
      await parseHealthReport("dp-x", (await store.get(key("dp-x")))?.value ?? ""),
    ).toMatchObject({
      ok: true,
      report: { replica: "cp-2" },
    });
    expect(await store.get(key("dp-y"))).toBeUndefined();
  });

  it("does not replace a report another replica received later", async () => {
    const { handlers, next } = listening();
    const key = healthReportKey(PREFIX, "dp-z");
    await store.commit(
      [],
      [
        {
          type: "put",
          key,
          value: await encodeHealthReport({
            replica: "cp-9",
            reportedAtMs: Date.now() + 60_000,
            nodes: [node("evicted")],
          }),
        },
      ],
    );
    // A clock behind cp-9's: cp-1 received its report first, so the stored one is newer.
    const shared = new SharedHealthReports({ store, prefix: PREFIX, replicaId: "cp-1" });
    await shared.start(handlers);
    const moved = next("moved dp-z");
    shared.publish("dp-z", [node("healthy")]);
    await moved;
    await shared.stop();
    const parsed = await parseHealthReport("dp-z", (await store.get(key))?.value ?? "");
    expect(parsed).toMatchObject({ ok: true, report: { replica: "cp-9" } });
  });

  it("reads everything again after its watch fails, and hands over what changed", async () => {
    const { handlers, next } = listening();
    /** The newest watch: make it miss events, then fail. */
    let latest: { deaf: boolean; fail(error: Error): void } | undefined;
    const breakable: Store = {
      ...store,
      kind: store.kind,
      async watch(prefix, fromRevision, inner: WatchHandlers) {
        const control = { deaf: false, fail: (error: Error) => inner.onError?.(error) };
        latest = control;
        return store.watch(prefix, fromRevision, {
          onEvents: (events: WatchEvent[]) => {
            if (!control.deaf) inner.onEvents(events);
          },
        });
      },
    };
    const resets: string[][] = [];
    handlers.onReset = (reports) => {
      resets.push([...reports.keys()].sort());
    };
    const put = async (id: string) =>
      store.commit(
        [],
        [
          {
            type: "put",
            key: healthReportKey(PREFIX, id),
            value: await encodeHealthReport({ replica: "cp-9", reportedAtMs: 0, nodes: [] }),
          },
        ],
      );
    const left = await store.range(`${PREFIX}meta/health/`);
    for (const item of left.items) await store.commit([], [{ type: "delete", key: item.key }]);
    await put("dp-1");
    const shared = new SharedHealthReports({
      store: breakable,
      prefix: PREFIX,
      replicaId: "cp-1",
      retryMs: 1,
    });
    await shared.start(handlers);
    // Changes the watch misses, then it fails.
    const first = latest;
    if (first === undefined) throw new Error("no watch");
    first.deaf = true;
    await store.commit([], [{ type: "delete", key: healthReportKey(PREFIX, "dp-1") }]);
    await put("dp-2");
    const gone = next("gone dp-1");
    const reported = next("report dp-2 cp-9");
    first.fail(new Error("watch cancelled"));
    // The re-read hands over the difference: dp-1 went, dp-2 came; no second reset.
    await Promise.all([gone, reported]);
    await shared.stop();
    expect(resets).toEqual([["dp-1"]]);
  });
});

describe("health report keys", () => {
  it.each([
    ["dp-1", "/p/meta/health/dp-1"],
    ["host:8080", "/p/meta/health/host:8080"],
    ["a/b%", "/p/meta/health/a%2Fb%25"],
  ])("%s <-> %s", (id, key) => {
    expect(healthReportKey("/p/", id)).toBe(key);
    expect(parseHealthReportKey("/p/", key)).toBe(id);
  });

  it("refuses keys outside meta/health/ or nested below it", () => {
    expect(parseHealthReportKey("/p/", "/p/meta/registry-gone/x/y")).toBeUndefined();
    expect(parseHealthReportKey("/p/", "/p/meta/health/a/b")).toBeUndefined();
    expect(parseHealthReportKey("/p/", "/p/meta/health/")).toBeUndefined();
  });
});
