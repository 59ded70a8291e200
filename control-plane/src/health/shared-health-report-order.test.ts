import { afterEach, describe, expect, it } from "vitest";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { evictedNodes } from "../testing/evicted-nodes.js";
import { healthReportKey } from "./health-report-key.js";
import { type SharedHealthHandlers, SharedHealthReports } from "./shared-health-reports.js";
import { encodeHealthReport, parseHealthReport } from "./stored-health-report.js";

const PREFIX = "/clawgate-health-order/";
/** Large enough to be stored deflated, which now happens off the event loop. */
const BIG = 20_000;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function embedded(): Promise<Store> {
  const store = await openEmbeddedStore({});
  cleanups.push(() => store.close());
  return store;
}

/** Handlers that record how many nodes each report of `dataPlane` had, in hand-over order. */
function recording(dataPlane: string) {
  const sizes: number[] = [];
  let wake: (() => void) | undefined;
  let wanted = -1;
  const handlers: SharedHealthHandlers = {
    onReset: () => undefined,
    onReport: (report) => {
      if (report.dataPlane !== dataPlane) return;
      sizes.push(report.nodes.length);
      if (report.nodes.length === wanted) wake?.();
    },
    onGone: () => undefined,
    onMoved: () => undefined,
  };
  /** Resolves once a report of `size` nodes is handed over. */
  const reportOf = (size: number) =>
    new Promise<void>((resolve) => {
      if (sizes.includes(size)) return resolve();
      wanted = size;
      wake = resolve;
    });
  return { handlers, sizes, reportOf };
}

describe("shared health reports of one data plane stay in order", () => {
  it("stores the newer report when it is sent while an older, larger one is deflating", async () => {
    const inner = await embedded();
    // Node counts of the reports each commit wrote, in the order the store took them.
    const written: number[] = [];
    let bothWritten: () => void = () => undefined;
    const settled = new Promise<void>((resolve) => {
      bothWritten = resolve;
    });
    const store: Store = {
      ...inner,
      kind: inner.kind,
      async commit(compares, operations) {
        const result = await inner.commit(compares, operations);
        for (const op of operations) {
          if (op.type !== "put" || !result.succeeded) continue;
          const parsed = await parseHealthReport("dp-1", op.value);
          written.push(parsed.ok ? parsed.report.nodes.length : -1);
          if (written.length === 2) bothWritten();
        }
        return result;
      },
    };
    const shared = new SharedHealthReports({
      store,
      prefix: PREFIX,
      replicaId: "cp-1",
      coalesceMs: 0,
    });
    cleanups.push(() => shared.stop());
    await shared.start(recording("dp-1").handlers);

    // Back to back in one turn: the first is still deflating on the thread pool when the
    // second, small and quick to encode, arrives.
    shared.publish("dp-1", evictedNodes(BIG));
    shared.publish("dp-1", evictedNodes(1));
    await settled;

    expect(written).toEqual([BIG, 1]);
    const stored = await inner.get(healthReportKey(PREFIX, "dp-1"));
    const parsed = await parseHealthReport("dp-1", stored?.value ?? "");
    expect(parsed.ok && parsed.report.nodes.length).toBe(1);
  });

  it("hands over a data plane's reports in the order they were written, large ones included", async () => {
    const store = await embedded();
    const shared = new SharedHealthReports({ store, prefix: PREFIX, replicaId: "cp-1" });
    const { handlers, sizes, reportOf } = recording("dp-2");
    await shared.start(handlers);
    const big = await encodeHealthReport({
      replica: "cp-9",
      reportedAtMs: 1,
      nodes: evictedNodes(BIG),
    });
    expect(big.startsWith('{"deflated":')).toBe(true);
    const small = await encodeHealthReport({
      replica: "cp-9",
      reportedAtMs: 2,
      nodes: evictedNodes(1),
    });
    const key = healthReportKey(PREFIX, "dp-2");

    // The large one takes far longer to inflate than the small one to parse.
    await store.commit([], [{ type: "put", key, value: big }]);
    await store.commit([], [{ type: "put", key, value: small }]);
    await reportOf(1);
    await shared.stop();
    expect(sizes).toEqual([BIG, 1]);
  });
});
