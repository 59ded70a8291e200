import type { ApplyResource } from "../../support/admin-client.js";
import type { ControlPlane } from "../../support/control-plane-process.js";

export type ApplyOutcome =
  | { ok: true; revision: number; ms: number; batches: number }
  | {
      ok: false;
      reason: string;
      ms: number /** Batches written before the refusal. */;
      batches: number;
    };

/**
 * POST /v1/apply of `resources` in batches of `batchSize` (all at once when it is at least
 * their number). Stops at the first refused batch and says why, so a limit is reported rather
 * than crashing the benchmark.
 */
export async function applyResources(
  cp: ControlPlane,
  resources: readonly ApplyResource[],
  batchSize: number,
  timeoutMs: number,
): Promise<ApplyOutcome> {
  const start = performance.now();
  let revision = 0;
  let batches = 0;
  for (let from = 0; from < resources.length; from += batchSize) {
    const batch = resources.slice(from, from + batchSize);
    let status: number;
    let text: string;
    try {
      const response = await fetch(`${cp.adminUrl}/v1/apply`, {
        method: "POST",
        headers: { authorization: `Bearer ${cp.token}`, "content-type": "application/json" },
        body: JSON.stringify({ resources: batch }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      status = response.status;
      text = await response.text();
    } catch (error) {
      return {
        ok: false,
        reason: `batch ${batches + 1} (${batch.length} resources): ${(error as Error).message}`,
        ms: performance.now() - start,
        batches,
      };
    }
    if (status < 200 || status > 299) {
      return {
        ok: false,
        reason: `batch ${batches + 1} (${batch.length} resources) answered ${status}: ${text.slice(0, 200)}`,
        ms: performance.now() - start,
        batches,
      };
    }
    // The answer names the store revision the whole batch was written at.
    revision = Math.max(revision, Number((JSON.parse(text) as { revision?: number }).revision));
    batches++;
  }
  return { ok: true, revision, ms: performance.now() - start, batches };
}
