import { dataPlaneState } from "./data-plane-state.js";
import type { DataPlaneState, DataPlaneView, FleetSource } from "./data-plane-view.js";

/** What the fleet keeps from a data plane's Hello; versions may come as the wire's bigint. */
export interface FleetHello {
  hostname: string;
  softwareVersion: string;
  lastAppliedVersion: number | bigint;
}

/** Names one stream of a data plane, so a closing old stream cannot disconnect a newer one. */
export type StreamToken = number;

/** One node as one data plane's probes see it, as the wire carries it. */
export interface ReportedNodeHealth {
  upstream: string;
  /** host:port */
  address: string;
  /** "healthy", "quarantined" or "evicted"; anything else is ignored by readers. */
  state: string;
  evidence: string;
  /** Unix milliseconds of the node's last state change. */
  changedAtMs: number | bigint;
}

/**
 * Told a data plane's whole view of node health, as it last reported it. A listener that takes
 * it in later returns a promise that settles (either way) once it has: the stream that sent it
 * reads no further meanwhile (HealthIntake), so the listener's queue stays bounded.
 */
export type HealthReportListener = (
  nodeId: string,
  nodes: readonly ReportedNodeHealth[],
) => unknown;

/** A node that left a data plane's view. */
export interface RemovedNode {
  upstream: string;
  address: string;
}

/**
 * What changed in a data plane's view since its previous report on the same stream
 * (NodeHealthReport with changes_only): `removed` leave first, then `nodes` apply in order.
 */
export interface HealthChanges {
  nodes: readonly ReportedNodeHealth[];
  removed: readonly RemovedNode[];
}

/** Told a changes-only report; a promise as for HealthReportListener. */
export type HealthChangesListener = (nodeId: string, changes: HealthChanges) => unknown;

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null | undefined)?.then === "function";
}

/**
 * The promises listeners returned (other values mean nothing), as one that settles once all
 * have; undefined when none did.
 */
function takenIn(results: unknown[]): Promise<void> | undefined {
  const pending = results.filter(isPromiseLike);
  if (pending.length === 0) return undefined;
  return Promise.allSettled(pending).then(() => undefined);
}

export interface FleetOptions {
  /** How long a connected data plane may lag the published version before it is STALE; default 10 s. */
  graceMs?: number;
  /** Milliseconds since the epoch; default Date.now. */
  clock?: () => number;
  /** A data plane disconnected this long is dropped from the list; default 1 h. */
  forgetAfterMs?: number;
}

interface DataPlaneRecord {
  nodeId: string;
  hostname: string;
  softwareVersion: string;
  /** The open stream; undefined while disconnected. */
  stream: StreamToken | undefined;
  appliedVersion: number;
  lastNack: { version: number; error: string; at: number; softwareVersion: string } | undefined;
  lastSeen: number;
  connectedAt: number | undefined;
  disconnectedAt: number | undefined;
  /** When it last fell behind the published version; undefined while caught up. */
  behindSince: number | undefined;
}

export const DATA_PLANE_STATES: readonly DataPlaneState[] = [
  "SYNCED",
  "SYNCING",
  "STALE",
  "NACKED",
  "DISCONNECTED",
];

/**
 * The control plane's view of every data plane: what it applied, what it refused, whether it
 * is connected. The snapshot server reports into it; the admin API and metrics read it.
 */
export class Fleet implements FleetSource {
  private readonly graceMs: number;
  private readonly clock: () => number;
  private readonly forgetAfterMs: number;
  private readonly records = new Map<string, DataPlaneRecord>();
  private published: number | null = null;
  private nextToken = 1;
  private readonly listeners = new Set<(nodeId: string | null) => void>();
  private readonly healthListeners = new Set<HealthReportListener>();
  private readonly healthChangeListeners = new Set<HealthChangesListener>();

  constructor(options: FleetOptions = {}) {
    this.graceMs = options.graceMs ?? 10_000;
    this.clock = options.clock ?? Date.now;
    this.forgetAfterMs = options.forgetAfterMs ?? 3_600_000;
  }

  /**
   * Calls `listener` after every change a data plane reports (with its node id) and after
   * every publish (with null); returns the unsubscribe function.
   */
  onChange(listener: (nodeId: string | null) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /**
   * Calls `listener` with every node-health report a connected data plane sends (its whole
   * view each time); returns the unsubscribe function.
   */
  onHealthReport(listener: HealthReportListener): () => void {
    this.healthListeners.add(listener);
    return () => {
      this.healthListeners.delete(listener);
    };
  }

  /**
   * Calls `listener` with every changes-only node-health report a connected data plane sends
   * (each on top of its previous report); returns the unsubscribe function.
   */
  onHealthChanges(listener: HealthChangesListener): () => void {
    this.healthChangeListeners.add(listener);
    return () => {
      this.healthChangeListeners.delete(listener);
    };
  }

  /**
   * A data plane sent what changed in its view; ignored unless `stream` is its current one.
   * Undefined when every listener took it in at once, else a promise that settles once all have.
   */
  healthChangesReported(
    nodeId: string,
    stream: StreamToken,
    changes: HealthChanges,
  ): Promise<void> | undefined {
    const record = this.records.get(nodeId);
    if (record === undefined || record.stream !== stream) return undefined;
    record.lastSeen = this.clock();
    return takenIn([...this.healthChangeListeners].map((listener) => listener(nodeId, changes)));
  }

  /**
   * A data plane sent its view of node health; ignored unless `stream` is its current one (a
   * report of a stream it replaced is older than what the new stream brings). Undefined when
   * every listener took it in at once, else a promise that settles once all have.
   */
  healthReported(
    nodeId: string,
    stream: StreamToken,
    nodes: readonly ReportedNodeHealth[],
  ): Promise<void> | undefined {
    const record = this.records.get(nodeId);
    if (record === undefined || record.stream !== stream) return undefined;
    record.lastSeen = this.clock();
    return takenIn([...this.healthListeners].map((listener) => listener(nodeId, nodes)));
  }

  /** A stream said Hello; returns the token its `disconnected` call must pass. */
  connected(nodeId: string, hello: FleetHello): StreamToken {
    const now = this.clock();
    const previous = this.records.get(nodeId);
    const applied = Number(hello.lastAppliedVersion);
    const token = this.nextToken++;
    this.records.set(nodeId, {
      nodeId,
      hostname: hello.hostname,
      softwareVersion: hello.softwareVersion,
      stream: token,
      appliedVersion: applied,
      lastNack: previous?.lastNack,
      lastSeen: now,
      connectedAt: now,
      disconnectedAt: undefined,
      // Time spent disconnected is not lag the data plane can be blamed for: the grace
      // period starts again at the new stream.
      behindSince: this.isBehind(applied) ? now : undefined,
    });
    this.changed(nodeId);
    return token;
  }

  acked(nodeId: string, version: number): void {
    const record = this.records.get(nodeId);
    if (record === undefined) return;
    record.appliedVersion = version;
    record.lastSeen = this.clock();
    if (!this.isBehind(version)) record.behindSince = undefined;
    this.changed(nodeId);
  }

  nacked(nodeId: string, version: number, error: string): void {
    const record = this.records.get(nodeId);
    if (record === undefined) return;
    const now = this.clock();
    record.lastNack = { version, error, at: now, softwareVersion: record.softwareVersion };
    record.lastSeen = now;
    // NACKED explains the lag of the published version; the grace period for the next
    // version starts when that one is published.
    if (version === this.published) record.behindSince = undefined;
    this.changed(nodeId);
  }

  /** Ignored unless `stream` is the node's current stream (it may have reconnected already). */
  disconnected(nodeId: string, stream: StreamToken): void {
    const record = this.records.get(nodeId);
    if (record === undefined || record.stream !== stream) return;
    record.stream = undefined;
    record.disconnectedAt = this.clock();
    record.behindSince = undefined;
    this.changed(nodeId);
  }

  setPublished(version: number): void {
    this.published = version;
    const now = this.clock();
    for (const record of this.records.values()) {
      if (record.stream === undefined) continue;
      if (this.isBehind(record.appliedVersion)) record.behindSince ??= now;
      else record.behindSince = undefined;
    }
    this.changed(null);
  }

  /**
   * True when the data plane NACKed `version` and still runs the software that did: sending
   * it again could only be refused again. An upgraded data plane gets another try.
   */
  refused(nodeId: string, version: number): boolean {
    const record = this.records.get(nodeId);
    const nack = record?.lastNack;
    return (
      nack !== undefined &&
      nack.version === version &&
      nack.softwareVersion === record?.softwareVersion
    );
  }

  /** When the data plane fell behind the published version; undefined while caught up. */
  behindSince(nodeId: string): number | undefined {
    return this.records.get(nodeId)?.behindSince;
  }

  get(nodeId: string): DataPlaneView | undefined {
    this.forgetOld();
    const record = this.records.get(nodeId);
    return record === undefined ? undefined : this.view(record);
  }

  list(): DataPlaneView[] {
    this.forgetOld();
    return [...this.records.values()]
      .sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0))
      .map((record) => this.view(record));
  }

  counts(): Record<DataPlaneState, number> {
    this.forgetOld();
    const counts = Object.fromEntries(DATA_PLANE_STATES.map((state) => [state, 0])) as Record<
      DataPlaneState,
      number
    >;
    for (const record of this.records.values()) counts[this.stateOf(record)]++;
    return counts;
  }

  private changed(nodeId: string | null): void {
    for (const listener of this.listeners) listener(nodeId);
  }

  private isBehind(applied: number): boolean {
    return this.published !== null && applied < this.published;
  }

  private stateOf(record: DataPlaneRecord): DataPlaneState {
    return dataPlaneState({
      connected: record.stream !== undefined,
      appliedVersion: record.appliedVersion,
      published: this.published,
      refusedPublished: this.published !== null && this.refused(record.nodeId, this.published),
      behindSince: record.behindSince,
      now: this.clock(),
      graceMs: this.graceMs,
    });
  }

  private view(record: DataPlaneRecord): DataPlaneView {
    const view: DataPlaneView = {
      nodeId: record.nodeId,
      hostname: record.hostname,
      softwareVersion: record.softwareVersion,
      connected: record.stream !== undefined,
      state: this.stateOf(record),
      appliedVersion: record.appliedVersion,
      publishedVersion: this.published,
      lastSeen: iso(record.lastSeen),
    };
    if (record.lastNack !== undefined) {
      const { version, error, at } = record.lastNack;
      view.lastNack = { version, error, at: iso(at) };
    }
    if (record.connectedAt !== undefined) view.connectedAt = iso(record.connectedAt);
    return view;
  }

  private forgetOld(): void {
    const now = this.clock();
    for (const [nodeId, record] of this.records) {
      if (
        record.disconnectedAt !== undefined &&
        now - record.disconnectedAt >= this.forgetAfterMs
      ) {
        this.records.delete(nodeId);
      }
    }
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
