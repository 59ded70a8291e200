import type { BreakerStateName, ReportedBreaker } from "./data-plane-record.js";
import type { DataPlaneRecords } from "./data-plane-records.js";

/** One data plane's breaker of one upstream, as the admin API and the console show it. */
export interface DataPlaneBreaker {
  dataPlane: string;
  state: BreakerStateName;
  /** ISO time of the breaker's last transition. */
  since: string;
  /** ISO time an open breaker's cooldown ends; absent unless open. */
  cooldownUntil?: string;
}

/** A breaker changed state on a data plane ("closed": it closed, or the data plane left). */
export interface BreakerChange extends DataPlaneBreaker {
  upstream: string;
}

/**
 * The fleet's breakers that are not closed, by upstream, from every replica's data planes (the
 * shared records); an upstream a data plane does not list is closed there. Tells listeners of
 * each breaker that changed, so the console's live feed carries only what moved.
 */
export class FleetBreakers {
  /** Each data plane's breakers as last seen, by upstream. */
  readonly #known = new Map<string, Map<string, ReportedBreaker>>();
  readonly #listeners = new Set<(change: BreakerChange) => void>();
  readonly #records: Pick<DataPlaneRecords, "get">;

  constructor(records: Pick<DataPlaneRecords, "get" | "onChange" | "nodes">) {
    this.#records = records;
    for (const nodeId of records.nodes()) this.#refresh(nodeId);
    records.onChange((nodeId) => this.#refresh(nodeId));
  }

  /** Every data plane's breaker of `upstream` that is not closed, by data plane. */
  upstream(upstream: string): DataPlaneBreaker[] {
    const out: DataPlaneBreaker[] = [];
    for (const [dataPlane, breakers] of this.#known) {
      const breaker = breakers.get(upstream);
      if (breaker !== undefined) out.push(view(dataPlane, breaker));
    }
    return out.sort((a, b) => (a.dataPlane < b.dataPlane ? -1 : a.dataPlane > b.dataPlane ? 1 : 0));
  }

  /** Calls `listener` with each breaker that changed on a data plane; returns the unsubscribe. */
  onChange(listener: (change: BreakerChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #refresh(nodeId: string): void {
    const before = this.#known.get(nodeId) ?? new Map<string, ReportedBreaker>();
    const after = new Map(
      (this.#records.get(nodeId)?.breakers ?? []).map((b) => [b.upstream, b] as const),
    );
    if (after.size === 0) this.#known.delete(nodeId);
    else this.#known.set(nodeId, after);
    const changes: BreakerChange[] = [];
    for (const [upstream, breaker] of after) {
      const old = before.get(upstream);
      if (
        old?.state !== breaker.state ||
        old.sinceMs !== breaker.sinceMs ||
        old.cooldownUntilMs !== breaker.cooldownUntilMs
      ) {
        changes.push({ upstream, ...view(nodeId, breaker) });
      }
    }
    for (const upstream of before.keys()) {
      if (after.has(upstream)) continue;
      // Closed (or its data plane left): no longer listed, so closed as of this report.
      changes.push({ upstream, dataPlane: nodeId, state: "closed", since: iso(Date.now()) });
    }
    for (const change of changes) for (const listener of this.#listeners) listener(change);
  }
}

function view(dataPlane: string, breaker: ReportedBreaker): DataPlaneBreaker {
  return {
    dataPlane,
    state: breaker.state,
    since: iso(breaker.sinceMs),
    ...(breaker.state === "open" && breaker.cooldownUntilMs > 0
      ? { cooldownUntil: iso(breaker.cooldownUntilMs) }
      : {}),
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
