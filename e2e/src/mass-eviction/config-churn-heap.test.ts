import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitForConvergence,
} from "../support/index.js";
import { refusingAddresses } from "./refusing-addresses.js";
import { settledHeapBytes } from "./settled-heap.js";

/**
 * Issue 9: memory is bounded by the config, not by the number of snapshots applied. 1,000
 * changes, each swapping one upstream's 10 nodes for another 10 that refuse connections (so every
 * change adds and drops health state, probes, metric series and evictions), over 100 upstreams
 * that stay. The heap after change 1,000 must be where it was after change 200.
 */

const CHANGES = 1_000;
const WARM_UP = 200;
const STATIC_UPSTREAMS = 100;
const NODES_PER_UPSTREAM = 10;
const HEALTH_CHECK = { intervalMs: 1_000, timeoutMs: 200, unhealthyThreshold: 2 };
const MB = 1024 * 1024;

describe("1,000 config changes", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  let addresses: string[];

  const nodesAt = (offset: number) =>
    Array.from({ length: NODES_PER_UPSTREAM }, (_, i) => ({
      address: addresses[(offset + i) % addresses.length]!,
      weight: 1,
    }));

  /**
   * Ten nodes never used before: the same refusing ports on a loopback address of the change's
   * own (127.1.x.y; all of 127/8 is loopback), so state kept for a gone node would pile up.
   */
  const churnNodes = (change: number) =>
    addresses.slice(0, NODES_PER_UPSTREAM).map((address) => ({
      address: address.replace("127.0.0.1", `127.1.${change >> 8}.${change & 255}`),
      weight: 1,
    }));

  beforeAll(async () => {
    addresses = await refusingAddresses(STATIC_UPSTREAMS * NODES_PER_UPSTREAM);
    cp = await startControlPlane({ CLAWGATE_LOG_LEVEL: "warn" });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.apply(
      Array.from({ length: STATIC_UPSTREAMS }, (_, u) => ({
        kind: "upstream" as const,
        name: `static-${u}`,
        spec: { nodes: nodesAt(u * NODES_PER_UPSTREAM), healthCheck: HEALTH_CHECK },
      })),
    );
    dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_LOG_LEVEL: "warn",
      NODE_OPTIONS: "--max-old-space-size=768",
    });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp]);
  });

  afterAll(() => teardown.run());

  it("does not grow the data plane's heap", { timeout: 120_000 }, async () => {
    let afterWarmUp = 0;
    for (let change = 1; change <= CHANGES; change++) {
      const written = await cp.admin.putUpstream("churn", {
        nodes: churnNodes(change),
        healthCheck: HEALTH_CHECK,
      });
      if (change === WARM_UP || change === CHANGES) {
        await waitForConvergence(cp, [dp], { atLeast: written.revision ?? 0 });
        const heap = await settledHeapBytes(dp);
        if (change === WARM_UP) afterWarmUp = heap;
        else {
          console.log(
            `config churn: heap ${(afterWarmUp / MB).toFixed(1)} MB after ${WARM_UP} changes, ` +
              `${(heap / MB).toFixed(1)} MB after ${CHANGES}`,
          );
          dp.process.assertRunning();
          // Generous: the heap moves with garbage not yet collected, a leak moves it steadily.
          expect(heap).toBeLessThan(afterWarmUp * 1.5 + 16 * MB);
        }
      }
    }
  });
});
