import { dataPlaneState } from "../fleet/data-plane-state.js";
import type { DataPlaneView, FleetSource } from "../fleet/data-plane-view.js";
import type { Fleet } from "../fleet/fleet.js";
import type { SharedDataPlane } from "./data-plane-record.js";
import type { DataPlaneRecords } from "./data-plane-records.js";

export interface FleetViewOptions {
  /** This replica's own data planes. */
  fleet: Pick<Fleet, "list" | "get" | "onChange">;
  /** Every replica's shared records. */
  records: Pick<DataPlaneRecords, "nodes" | "remote" | "onChange">;
  /** This replica's id, shown as the replica its own data planes stream from. */
  replicaId: string;
  /** How long a data plane may lag before it is STALE; default 10 s, as the fleet's. */
  graceMs?: number;
  /** A data plane whose replica dropped its record stays listed DISCONNECTED this long; default 1 h. */
  forgetAfterMs?: number;
  clock?: () => number;
}

/** What a replica shares of one of its data planes: the facts its state follows from. */
export function sharedDataPlane(view: DataPlaneView, behindSinceMs?: number): SharedDataPlane {
  return {
    hostname: view.hostname,
    softwareVersion: view.softwareVersion,
    appliedVersion: view.appliedVersion,
    connectedAtMs: view.connectedAt === undefined ? 0 : Date.parse(view.connectedAt),
    ...(view.lastNack === undefined
      ? {}
      : {
          lastNack: {
            version: view.lastNack.version,
            error: view.lastNack.error,
            atMs: Date.parse(view.lastNack.at),
          },
        }),
    publishedVersion: view.publishedVersion,
    ...(behindSinceMs === undefined ? {} : { behindSinceMs: Math.round(behindSinceMs) }),
  };
}

/**
 * Keeps this replica's record of each of its data planes in step with its fleet: written while
 * the data plane is connected here (on change only, batched by the records), dropped when it
 * leaves; a publish changes what each one lags. Returns the unsubscribe function.
 */
export function shareFleet(
  fleet: Pick<Fleet, "onChange" | "get" | "list" | "behindSince">,
  records: Pick<DataPlaneRecords, "status" | "disconnected">,
): () => void {
  const share = (view: DataPlaneView | undefined, nodeId: string) => {
    if (view?.connected === true)
      records.status(nodeId, sharedDataPlane(view, fleet.behindSince(nodeId)));
    else records.disconnected(nodeId);
  };
  return fleet.onChange((nodeId) => {
    if (nodeId !== null) share(fleet.get(nodeId), nodeId);
    else for (const view of fleet.list()) if (view.connected) share(view, view.nodeId);
  });
}

/**
 * The whole fleet as any replica shows it (GET /v1/dataplanes, clawctl status, the console):
 * this replica's data planes from its own fleet, merged on read with the ones other replicas
 * share through the store. A data plane connected here wins; else the newest other replica's
 * record; else this replica's memory of it, DISCONNECTED. Each is judged against the version
 * its own replica publishes (a replica started later may number the same config higher).
 */
export class FleetView implements FleetSource {
  readonly #fleet: FleetViewOptions["fleet"];
  readonly #records: FleetViewOptions["records"];
  readonly #replicaId: string;
  readonly #graceMs: number;
  readonly #forgetAfterMs: number;
  readonly #clock: () => number;
  /** The last view of each data plane another replica shares, to tell a change from a repeat. */
  readonly #lastRemote = new Map<string, { view: DataPlaneView; json: string }>();
  /** Data planes another replica stopped sharing (disconnected, or the replica died). */
  readonly #gone = new Map<string, { view: DataPlaneView; at: number }>();
  readonly #listeners = new Set<(nodeId: string | null) => void>();

  constructor(options: FleetViewOptions) {
    this.#fleet = options.fleet;
    this.#records = options.records;
    this.#replicaId = options.replicaId;
    this.#graceMs = options.graceMs ?? 10_000;
    this.#forgetAfterMs = options.forgetAfterMs ?? 3_600_000;
    this.#clock = options.clock ?? Date.now;
    for (const nodeId of this.#records.nodes()) this.#remoteChanged(nodeId);
    this.#records.onChange((nodeId) => this.#remoteChanged(nodeId));
    this.#fleet.onChange((nodeId) => this.#emit(nodeId));
  }

  /** Calls `listener` after any data plane changed (its node id) or a publish (null). */
  onChange(listener: (nodeId: string | null) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  get(nodeId: string): DataPlaneView | undefined {
    const local = this.#fleet.get(nodeId);
    if (local?.connected === true) return { ...local, replica: this.#replicaId };
    const remote = this.#remoteView(nodeId);
    if (remote !== undefined) return remote;
    if (local !== undefined) return local;
    const gone = this.#gone.get(nodeId);
    if (gone === undefined) return undefined;
    if (this.#clock() - gone.at >= this.#forgetAfterMs) {
      this.#gone.delete(nodeId);
      return undefined;
    }
    return gone.view;
  }

  list(): DataPlaneView[] {
    const ids = new Set(this.#fleet.list().map((view) => view.nodeId));
    for (const nodeId of this.#records.nodes()) ids.add(nodeId);
    for (const nodeId of this.#gone.keys()) ids.add(nodeId);
    const views: DataPlaneView[] = [];
    for (const nodeId of [...ids].sort()) {
      const view = this.get(nodeId);
      if (view !== undefined) views.push(view);
    }
    return views;
  }

  #remoteView(nodeId: string): DataPlaneView | undefined {
    const remote = this.#records.remote(nodeId);
    const shared = remote?.record.dataPlane;
    // A record from a replica older than the fleet-wide list carries no state to show.
    if (remote === undefined || shared === undefined) return undefined;
    // Judged against the version its own replica publishes.
    const published = shared.publishedVersion;
    const view: DataPlaneView = {
      nodeId,
      hostname: shared.hostname,
      softwareVersion: shared.softwareVersion,
      connected: true,
      state: dataPlaneState({
        connected: true,
        appliedVersion: shared.appliedVersion,
        published,
        refusedPublished: shared.lastNack !== undefined && shared.lastNack.version === published,
        behindSince: shared.behindSinceMs,
        now: this.#clock(),
        graceMs: this.#graceMs,
      }),
      appliedVersion: shared.appliedVersion,
      publishedVersion: published,
      // Its replica shares changes, not every report: the last one it shared.
      lastSeen: iso(remote.record.changedAtMs),
      connectedAt: iso(shared.connectedAtMs),
      replica: remote.replica,
    };
    if (shared.lastNack !== undefined) {
      const { version, error, atMs } = shared.lastNack;
      view.lastNack = { version, error, at: iso(atMs) };
    }
    return view;
  }

  /** A record changed, this replica's or another's; only another's is news here. */
  #remoteChanged(nodeId: string): void {
    const view = this.#remoteView(nodeId);
    const last = this.#lastRemote.get(nodeId);
    if (view === undefined) {
      if (last === undefined) return;
      this.#lastRemote.delete(nodeId);
      const { replica: _replica, ...rest } = last.view;
      this.#gone.set(nodeId, {
        view: { ...rest, connected: false, state: "DISCONNECTED", lastSeen: iso(this.#clock()) },
        at: this.#clock(),
      });
      this.#emit(nodeId);
      return;
    }
    this.#gone.delete(nodeId);
    // The state alone moves with time (SYNCING to STALE): not a change anyone shared.
    const json = JSON.stringify({ ...view, state: undefined });
    if (last?.json === json) return;
    this.#lastRemote.set(nodeId, { view, json });
    this.#emit(nodeId);
  }

  #emit(nodeId: string | null): void {
    for (const listener of this.#listeners) listener(nodeId);
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
