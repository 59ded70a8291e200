/**
 * When the leader writes a baking rollout's evidence ledger to the store.
 *
 * Why its own unit: the ledger changes on nearly every check under traffic (twice a second), and
 * each write is a revision etcd keeps until compaction, while the stored ledger is only read by
 * a process that starts judging the rollout (a new leader, a restarted control plane). So a
 * routine check writes only when the verdict it reached differs from the one last written, or
 * once `everyMs` has passed since the last write; the writes before an ending are not paced.
 */
import type { Verdict } from "./rollout-verdict.js";

export class EvidencePace {
  readonly #everyMs: number;
  #lastAt = Number.NEGATIVE_INFINITY;
  #lastVerdict: Verdict["kind"] | undefined;

  /** `everyMs`: the longest a changed ledger waits for its write (see RolloutControllerOptions). */
  constructor(everyMs: number) {
    if (!(everyMs >= 0)) throw new RangeError(`everyMs must be at least 0, got ${everyMs}`);
    this.#everyMs = everyMs;
  }

  /** Whether a routine check at `now` that reached `verdict` writes a changed ledger. */
  due(now: number, verdict: Verdict["kind"]): boolean {
    // A wall clock stepped back writes at once rather than not until it catches up.
    const elapsed = now - this.#lastAt;
    return verdict !== this.#lastVerdict || elapsed >= this.#everyMs || elapsed < 0;
  }

  wrote(now: number, verdict: Verdict["kind"]): void {
    this.#lastAt = now;
    this.#lastVerdict = verdict;
  }

  /** A new rollout's first changed ledger is written at once. */
  reset(): void {
    this.#lastAt = Number.NEGATIVE_INFINITY;
    this.#lastVerdict = undefined;
  }
}
