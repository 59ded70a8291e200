import type { DataPlane } from "../../support/data-plane-process.js";
import { httpStatus } from "../../support/http-probe.js";
import { metricValue } from "../../support/metrics-text.js";

/** Longest event-loop block since the last read of it (prom-client resets it on each read). */
export const LAG = "nodejs_eventloop_lag_max_seconds";

/** How often /healthz is asked while a data plane starts: the start window ends this close to its listening. */
const POLL_MS = 20;

/** Reads the lag of one data plane, in ms; the read starts a new window. */
export async function readLagMs(dp: DataPlane, timeoutMs = 60_000): Promise<number> {
  const response = await fetch(`${dp.adminUrl}/metrics?name=${LAG}`, {
    signal: AbortSignal.timeout(timeoutMs),
  });
  return Math.round((metricValue(await response.text(), LAG) ?? Number.NaN) * 1000);
}

/**
 * Waits for a starting data plane to answer /healthz (its listeners are bound), then reads its
 * lag: the longest block of the process's start (the histogram is enabled while the data plane
 * is assembled, in the turn that evaluated its modules), before it could serve anyone. The
 * read resets the histogram, so the next one covers the time from listening on: the boot with
 * its first full snapshot. Ten processes starting at once on two cores stretch that first
 * turn's remainder (building the proxy, spawning the probe worker) to hundreds of ms; it is
 * reported apart, not as a block of the snapshot's apply.
 */
export async function startBlockMs(dp: DataPlane, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while ((await httpStatus(`${dp.adminUrl}/healthz`)) !== 200) {
    if (performance.now() > deadline) throw new Error(`${dp.nodeId} never listened`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  return readLagMs(dp);
}
