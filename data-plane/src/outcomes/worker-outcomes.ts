import type { VersionOutcomeInit } from "../snapshot-client/snapshot-client.js";
import { KEPT_VERSIONS, toReport, type VersionCounts } from "./version-outcomes.js";

/**
 * With workers > 1 the requests are answered, and counted per version, in the workers, while
 * the one snapshot stream is the primary's: each worker sends its cumulative counts (its own
 * VersionOutcomes) and this sums them into the data plane's one OutcomeReport, so a data
 * plane with workers can be a rollout's canary.
 *
 * A worker that dies or is replaced keeps its last counts in the sum: they are answers
 * clients saw, and the control plane takes every report as the data plane's running total,
 * which must never shrink because a process went away. Only versions older than the newest
 * few are forgotten, as in one process.
 */
export class WorkerOutcomes {
  readonly #byWorker = new Map<number, readonly VersionCounts[]>();
  #changed = false;

  /** A worker's cumulative counts, replacing what it sent before. */
  reported(workerId: number, counts: readonly VersionCounts[]): void {
    this.#byWorker.set(workerId, counts);
    this.#changed = true;
  }

  /** The counts summed across workers when any worker sent new ones, else undefined. */
  takeReport(): VersionOutcomeInit[] | undefined {
    if (!this.#changed) return undefined;
    this.#changed = false;
    const sums = new Map<number, { requests: number; failures: number }>();
    for (const counts of this.#byWorker.values()) {
      for (const { version, requests, failures } of counts) {
        const sum = sums.get(version) ?? { requests: 0, failures: 0 };
        sum.requests += requests;
        sum.failures += failures;
        sums.set(version, sum);
      }
    }
    const kept = [...sums.keys()].sort((a, b) => a - b).slice(-KEPT_VERSIONS);
    const oldest = kept[0] ?? 0;
    // Drop what no report will carry again, and workers left with nothing to say.
    for (const [worker, counts] of this.#byWorker) {
      const recent = counts.filter((c) => c.version >= oldest);
      if (recent.length === 0) this.#byWorker.delete(worker);
      else this.#byWorker.set(worker, recent);
    }
    return kept.map((version) => toReport({ version, ...sums.get(version)! }));
  }
}
