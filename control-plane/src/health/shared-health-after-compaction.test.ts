import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openEtcdStore } from "../store/etcd-store.js";
import { compactStore, holdNextWatch } from "../testing/compaction.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { evictedNodes } from "../testing/evicted-nodes.js";
import { healthReportKey } from "./health-report-key.js";
import { type SharedHealthHandlers, SharedHealthReports } from "./shared-health-reports.js";
import { encodeHealthReport } from "./stored-health-report.js";

let etcd: EtcdProcess;
beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The view a replica builds from the handlers: node count of each data plane's report. */
function view() {
  const counts = new Map<string, number>();
  const waiters = new Set<() => void>();
  const changed = () => {
    for (const waiter of [...waiters]) waiter();
  };
  const handlers: SharedHealthHandlers = {
    onReset: (reports) => {
      counts.clear();
      for (const report of reports.values()) counts.set(report.dataPlane, report.nodes.length);
      changed();
    },
    onReport: (report) => {
      counts.set(report.dataPlane, report.nodes.length);
      changed();
    },
    onGone: (dataPlane) => {
      counts.delete(dataPlane);
      changed();
    },
    onMoved: () => undefined,
  };
  const snapshot = () => Object.fromEntries([...counts].sort());
  /** Resolves once the view equals `wanted`; checked after every hand-over. */
  const reaches = (wanted: Record<string, number>) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (JSON.stringify(snapshot()) !== JSON.stringify(wanted)) return;
        waiters.delete(check);
        resolve();
      };
      waiters.add(check);
      check();
    });
  return { handlers, snapshot, reaches };
}

describe("shared health reports after etcd compacts the watch away", () => {
  it("re-reads and converges on the store, deflated reports included, then follows it", async () => {
    const raw = await openEtcdStore({ endpoints: [etcd.endpoint] });
    cleanups.push(() => raw.close());
    const prefix = `/health-compaction-${process.pid}/`;
    const put = async (dataPlane: string, nodes: number) =>
      (
        await raw.commit(
          [],
          [
            {
              type: "put",
              key: healthReportKey(prefix, dataPlane),
              value: await encodeHealthReport({
                replica: "cp-9",
                reportedAtMs: 1,
                nodes: evictedNodes(nodes),
              }),
            },
          ],
        )
      ).revision;
    const remove = (dataPlane: string) =>
      raw.commit([], [{ type: "delete", key: healthReportKey(prefix, dataPlane) }]);
    await put("dp-gone", 1);
    await put("dp-changed", 1);
    await put("dp-kept", 2);

    const held = holdNextWatch(raw);
    const shared = new SharedHealthReports({
      store: held.store,
      prefix,
      replicaId: "cp-1",
      retryMs: 10,
    });
    cleanups.push(() => shared.stop());
    const { handlers, snapshot, reaches } = view();
    const started = shared.start(handlers);
    await held.requested;

    // Read, not yet watching: one report goes, one grows past the deflate threshold, one is
    // new, and etcd compacts all of it away before the watch opens.
    await remove("dp-gone");
    await put("dp-changed", 20_000);
    const last = await put("dp-new", 3);
    await compactStore(raw, last, { etcdEndpoint: etcd.endpoint });
    held.release();
    await started;

    await reaches({ "dp-changed": 20_000, "dp-kept": 2, "dp-new": 3 });
    expect(snapshot()).toEqual({ "dp-changed": 20_000, "dp-kept": 2, "dp-new": 3 });

    // The new watch follows later writes.
    await put("dp-later", 4);
    await remove("dp-kept");
    await reaches({ "dp-changed": 20_000, "dp-later": 4, "dp-new": 3 });
  }, 30_000);
});
