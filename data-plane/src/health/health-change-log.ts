import { type NodeHealth, STREAM_LIMITS } from "@clawgate/proto";
import type { HealthState } from "./node-health.js";

/** What changed in a data plane's view since its last report (NodeHealthReport changes_only). */
export interface HealthChanges {
  /** Nodes that left the view; the control plane applies these first. */
  readonly removed: NodeHealth[];
  /** Each change in the order it happened; a node that changed twice is listed twice. */
  readonly nodes: NodeHealth[];
}

/** A node's state before its first change since the log was started: absent when it was new. */
export type StateAtStart = HealthState | "absent";

type Entry =
  | { readonly key: string; readonly kind: "state"; readonly message: NodeHealth }
  | { readonly key: string; readonly kind: "removed"; readonly message: NodeHealth };

/**
 * The changes to the node-health view since the last report, so a report costs what changed
 * rather than a pass over every watched node (issue 9: 20,000 nodes a data plane, a report a
 * second). Every change is kept, in order, so the control plane sees, and journals, every state.
 *
 * It is bounded: past `limit` entries (a long time without a stream to report on) it keeps
 * nothing and says so, and the next report is the whole view instead.
 */
export class HealthChangeLog {
  #entries: Entry[] = [];
  /** Each node changed since the start, with its state then; the whole view reports that one. */
  readonly #atStart = new Map<string, StateAtStart>();
  #overflowed = false;
  /** Removals among the entries: without any, `take` lists the entries as they are. */
  #removals = 0;
  readonly #limit: number;

  constructor(limit: number = STREAM_LIMITS.healthNodes) {
    this.#limit = limit;
  }

  /** Starts the log anew: what changes from now on is reported after a view taken now. */
  restart(): void {
    this.#entries = [];
    this.#atStart.clear();
    this.#overflowed = false;
    this.#removals = 0;
  }

  /** The node changed (or is new, `from` "absent") and is now as `message` says. */
  changed(upstream: string, address: string, from: StateAtStart, message: NodeHealth): void {
    this.#add({ key: nodeKey(upstream, address), kind: "state", message }, from);
  }

  /** The node left the view in state `from`. */
  removed(upstream: string, address: string, from: HealthState): void {
    const message: NodeHealth = {
      $typeName: "clawgate.v1.NodeHealth",
      upstream,
      address,
      state: "",
      evidence: "",
      changedAtMs: 0n,
    };
    this.#add({ key: nodeKey(upstream, address), kind: "removed", message }, from);
  }

  /**
   * The node's state when the log was started, when it changed since; undefined when it has not
   * changed (or changed only after the log overflowed: the whole view goes again after it).
   */
  stateAtStart(upstream: string, address: string): StateAtStart | undefined {
    return this.#atStart.get(nodeKey(upstream, address));
  }

  /**
   * What changed since the start, and starts the log anew; undefined when it overflowed (the
   * whole view must go instead). A node removed after changing is listed as removed only (its
   * earlier changes are moot: the control plane forgets it), and one removed and back is listed
   * as removed and then with its changes since it came back.
   */
  take(): HealthChanges | undefined {
    if (this.#overflowed) {
      this.restart();
      return undefined;
    }
    const entries = this.#entries;
    const removals = this.#removals;
    this.restart();
    // The common case, and the one of 20,000 entries (a first snapshot's nodes, a rack
    // evicted): nothing left, so every change stands, in order. One pass, no lookups.
    if (removals === 0) return { nodes: entries.map((entry) => entry.message), removed: [] };
    const lastRemoval = new Map<string, number>();
    entries.forEach((entry, index) => {
      if (entry.kind === "removed") lastRemoval.set(entry.key, index);
    });
    const nodes: NodeHealth[] = [];
    const removed: NodeHealth[] = [];
    entries.forEach((entry, index) => {
      if (entry.kind === "removed") {
        if (lastRemoval.get(entry.key) === index) removed.push(entry.message);
        return;
      }
      if ((lastRemoval.get(entry.key) ?? -1) < index) nodes.push(entry.message);
    });
    return { nodes, removed };
  }

  #add(entry: Entry, from: StateAtStart): void {
    if (this.#overflowed) return;
    if (this.#entries.length >= this.#limit) {
      // The memory goes now; the whole view goes with the next report.
      this.#overflowed = true;
      this.#entries = [];
      return;
    }
    this.#entries.push(entry);
    if (entry.kind === "removed") this.#removals += 1;
    if (!this.#atStart.has(entry.key)) this.#atStart.set(entry.key, from);
  }
}

/** Upstream names hold no space (DESIGN.md resource names): the key is unambiguous. */
function nodeKey(upstream: string, address: string): string {
  return `${upstream} ${address}`;
}
