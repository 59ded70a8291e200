import type { Clock } from "../clock/clock.js";
import type { BreakerFailure } from "./breaker-outcome.js";
import type { BreakerSettings } from "./breaker-policy.js";
import type { TripReason, TripRule } from "./trip-rule.js";

/**
 * Trips when more than `failureRatio` of the requests in the last `windowMs` failed, once the
 * window holds at least `minRequests`. Counts live in a ring of buckets with running totals, so
 * each call costs O(1) whatever the traffic; the price is granularity: an event stays counted
 * for between windowMs * (buckets - 1) / buckets and windowMs.
 */
export class SlidingWindowRule implements TripRule {
  readonly reason: TripReason = "failure_ratio";
  private readonly bucketMs: number;
  private readonly totals: Uint32Array;
  private readonly failures: Uint32Array;
  private head = 0;
  private headStart: number;
  private total = 0;
  private failed = 0;

  /** @param buckets ring size; default 10 (3 s buckets for the 30 s default window). */
  constructor(
    private readonly settings: Pick<BreakerSettings, "windowMs" | "minRequests" | "failureRatio">,
    private readonly clock: Clock,
    buckets = 10,
  ) {
    this.bucketMs = settings.windowMs / buckets;
    this.totals = new Uint32Array(buckets);
    this.failures = new Uint32Array(buckets);
    this.headStart = clock.now();
  }

  success(): void {
    this.rotate();
    this.totals[this.head]! += 1;
    this.total += 1;
  }

  failure(_kind: BreakerFailure): boolean {
    this.rotate();
    this.totals[this.head]! += 1;
    this.failures[this.head]! += 1;
    this.total += 1;
    this.failed += 1;
    return (
      this.total >= this.settings.minRequests &&
      this.failed / this.total > this.settings.failureRatio
    );
  }

  /** Requests and failures currently counted; for inspection and tests. */
  counts(): { total: number; failed: number } {
    this.rotate();
    return { total: this.total, failed: this.failed };
  }

  private rotate(): void {
    const elapsed = Math.floor((this.clock.now() - this.headStart) / this.bucketMs);
    if (elapsed <= 0) return;
    const size = this.totals.length;
    const steps = Math.min(elapsed, size);
    for (let i = 0; i < steps; i++) {
      this.head = (this.head + 1) % size;
      this.total -= this.totals[this.head]!;
      this.failed -= this.failures[this.head]!;
      this.totals[this.head] = 0;
      this.failures[this.head] = 0;
    }
    this.headStart += elapsed * this.bucketMs;
  }
}
