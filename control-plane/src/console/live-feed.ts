import type { DataPlaneView, FleetSource } from "../fleet/data-plane-view.js";
import type { Fleet } from "../fleet/fleet.js";
import type { FleetHealth, NodeHealthSummary } from "../health/fleet-health.js";
import type { HealEvent } from "../journal/heal-event.js";
import type { Journal } from "../journal/journal.js";
import type { BreakerChange, FleetBreakers } from "../replicas/fleet-breakers.js";
import type { SnapshotStatus, SnapshotStatusSource } from "../snapshot/snapshot-status.js";

/** One change the console is told about, as it goes on the wire (the SSE event name and data). */
export type LiveEvent =
  /** A publish: the version data planes are sent now. */
  | { type: "snapshot"; data: SnapshotStatus }
  /** A data plane connected, acknowledged, refused a version or went away. */
  | { type: "dataplane"; data: DataPlaneView }
  /** A node's majority verdict changed (healthy, quarantined, evicted, split). */
  | { type: "verdict"; data: NodeHealthSummary }
  /** A data plane's report of node health changed, without changing a majority. */
  | { type: "health"; data: { dataPlane: string } }
  /** The heal journal recorded an event. */
  | { type: "heal"; data: HealEvent }
  /** A data plane's breaker of an upstream changed state (opened, half-opened, closed). */
  | { type: "breaker"; data: BreakerChange };

export type LiveListener = (event: LiveEvent) => void;

export interface LiveFeedSources {
  snapshot: SnapshotStatusSource;
  fleet: FleetSource & Pick<Fleet, "onChange" | "get">;
  /** Node health across the fleet; default none (no verdict or health events). */
  health?: Pick<FleetHealth, "onVerdict" | "onUpdate">;
  /** Heal journal; default none (no heal events). */
  journal?: Pick<Journal, "onRecord">;
  /** Every data plane's breakers; default none (no breaker events). */
  breakers?: Pick<FleetBreakers, "onChange">;
}

/**
 * Turns what the control plane already follows (fleet registry, shared health reports, heal
 * journal) into one stream of events for the console. It subscribes to its sources only
 * while someone listens, so a control plane nobody watches pays nothing for it.
 */
export class LiveFeed {
  readonly #sources: LiveFeedSources;
  readonly #listeners = new Set<LiveListener>();
  #unsubscribe: Array<() => void> = [];

  constructor(sources: LiveFeedSources) {
    this.#sources = sources;
  }

  /** Listeners now; the SSE route's clients. */
  get size(): number {
    return this.#listeners.size;
  }

  /** Calls `listener` with every event from now on; returns the unsubscribe function. */
  subscribe(listener: LiveListener): () => void {
    if (this.#listeners.size === 0) this.#start();
    this.#listeners.add(listener);
    return () => {
      if (!this.#listeners.delete(listener)) return;
      if (this.#listeners.size === 0) this.#stop();
    };
  }

  #start(): void {
    const { snapshot, fleet, health, journal, breakers } = this.#sources;
    this.#unsubscribe = [
      fleet.onChange((nodeId) => {
        if (nodeId === null) {
          this.#emit({ type: "snapshot", data: snapshot.status() });
          return;
        }
        const view = fleet.get(nodeId);
        if (view !== undefined) this.#emit({ type: "dataplane", data: view });
      }),
    ];
    if (health !== undefined) {
      this.#unsubscribe.push(
        health.onVerdict((change) => this.#emit({ type: "verdict", data: change.summary })),
        health.onUpdate((dataPlane) => this.#emit({ type: "health", data: { dataPlane } })),
      );
    }
    if (journal !== undefined) {
      this.#unsubscribe.push(
        journal.onRecord((event) => this.#emit({ type: "heal", data: event })),
      );
    }
    if (breakers !== undefined) {
      this.#unsubscribe.push(
        breakers.onChange((change) => this.#emit({ type: "breaker", data: change })),
      );
    }
  }

  #stop(): void {
    for (const unsubscribe of this.#unsubscribe) unsubscribe();
    this.#unsubscribe = [];
  }

  #emit(event: LiveEvent): void {
    // A copy: a listener that drops its client unsubscribes while we iterate.
    for (const listener of [...this.#listeners]) listener(event);
  }
}
