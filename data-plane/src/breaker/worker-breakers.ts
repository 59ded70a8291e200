import { BreakerPhase } from "@clawgate/proto";
import type { BreakerStateInit } from "../snapshot-client/snapshot-client.js";

/** One breaker that is not closed, as a worker sends it on the JSON IPC channel (no bigints). */
export interface WorkerBreaker {
  upstream: string;
  phase: BreakerPhase;
  sinceMs: number;
  cooldownUntilMs: number;
}

/** A worker's BreakerStates report in the form the IPC channel carries. */
export function toWorkerBreakers(states: readonly BreakerStateInit[]): WorkerBreaker[] {
  return states.map((state) => ({
    upstream: state.upstream,
    phase: state.phase,
    sinceMs: Number(state.sinceMs),
    cooldownUntilMs: Number(state.cooldownUntilMs),
  }));
}

/** Open refuses every request, half-open all but its probes: open is the worse. */
function severity(phase: BreakerPhase): number {
  return phase === BreakerPhase.OPEN ? 2 : phase === BreakerPhase.HALF_OPEN ? 1 : 0;
}

/** True when `a` says more about what clients meet than `b`. */
function worse(a: WorkerBreaker, b: WorkerBreaker): boolean {
  if (severity(a.phase) !== severity(b.phase)) return severity(a.phase) > severity(b.phase);
  // Of two open ones, the one that refuses longer; then the one that tripped first.
  if (a.cooldownUntilMs !== b.cooldownUntilMs) return a.cooldownUntilMs > b.cooldownUntilMs;
  return a.sinceMs < b.sinceMs;
}

/**
 * With workers > 1 each worker has its own breakers (the requests are answered there), while
 * the one snapshot stream is the primary's: each worker sends its breakers that are not closed
 * on every transition, and this merges them into the data plane's one BreakerReport. An
 * upstream whose breaker is open in any worker is reported, with the worst state any worker
 * has. A worker that exits takes its breakers with it: the one that replaces it starts closed.
 */
export class WorkerBreakers {
  readonly #byWorker = new Map<number, readonly WorkerBreaker[]>();

  /** A worker's breakers not closed, replacing what it sent before. */
  reported(workerId: number, breakers: readonly WorkerBreaker[]): void {
    if (breakers.length === 0) this.#byWorker.delete(workerId);
    else this.#byWorker.set(workerId, breakers);
  }

  /** The worker exited. */
  gone(workerId: number): void {
    this.#byWorker.delete(workerId);
  }

  /** The merged report: per upstream that still `exists`, the worst breaker of any worker. */
  report(exists: (upstream: string) => boolean): BreakerStateInit[] {
    const merged = new Map<string, WorkerBreaker>();
    for (const breakers of this.#byWorker.values()) {
      for (const breaker of breakers) {
        if (severity(breaker.phase) === 0 || !exists(breaker.upstream)) continue;
        const known = merged.get(breaker.upstream);
        if (known === undefined || worse(breaker, known)) merged.set(breaker.upstream, breaker);
      }
    }
    return [...merged.values()]
      .sort((a, b) => (a.upstream < b.upstream ? -1 : a.upstream > b.upstream ? 1 : 0))
      .map((breaker) => ({
        upstream: breaker.upstream,
        phase: breaker.phase,
        sinceMs: BigInt(breaker.sinceMs),
        cooldownUntilMs: BigInt(breaker.cooldownUntilMs),
      }));
  }
}
