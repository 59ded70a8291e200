import type { NodeHealth, NodeHealthReport } from "@clawgate/proto";
import type { Fleet, ReportedNodeHealth, StreamToken } from "../fleet/fleet.js";
import { OrderedWork } from "../turns/ordered-work.js";
import { INTAKE_SLICE_ENTRIES, intakeTurns, type TurnBudget } from "../turns/turn-budget.js";
import { checkNodes, healthCountOver } from "./request-bounds.js";

/**
 * A node-health report to take in: a ReceivedHealthReport (bytes decoded a slice at a time) or
 * one decoded whole (a newer data plane's, with fields only fromBinary keeps).
 */
export interface HealthReportSource {
  readonly changesOnly: boolean;
  readonly nodeCount: number;
  readonly removed: readonly NodeHealth[];
  /** The next at most `max` nodes; an empty list once every node was read. */
  nextNodes(max: number): NodeHealth[];
}

/** A report decoded whole, read as a source. */
export function decodedReport(report: NodeHealthReport): HealthReportSource {
  let read = 0;
  return {
    changesOnly: report.changesOnly,
    nodeCount: report.nodes.length,
    removed: report.removed,
    nextNodes(max) {
      const slice = report.nodes.slice(read, read + max);
      read += slice.length;
      return slice;
    },
  };
}

export interface HealthIntakeOptions {
  fleet: Pick<Fleet, "healthReported" | "healthChangesReported">;
  nodeId: string;
  stream: StreamToken;
  /**
   * Ends the stream over a report out of bounds (`undecodable` false; the reason names the
   * field, its size and the limit) or one whose bytes are no report (`undecodable` true).
   */
  refuse(reason: string, undecodable: boolean): void;
  /** Default the control plane's intake budget (intakeTurns). */
  turns?: TurnBudget;
  /**
   * Called when the reports taken but not yet handed to the fleet reach MAX_BACKLOG (true) and
   * when they fall back under it (false): the stream stops reading meanwhile, so a data plane
   * that sends faster than the control plane takes in waits in its own transport instead of
   * growing this process's memory (each report may be megabytes).
   */
  onBacklog?: (full: boolean) => void;
}

/** Reports of one stream held at most before it stops reading (see onBacklog). */
export const MAX_BACKLOG = 4;

/**
 * One stream's node-health reports, decoded and bounds-checked a slice at a time within the
 * intake's turn budget, then handed to the fleet whole, one report after another in the order
 * they came: a changes-only report reaches the fleet only after the whole report before it.
 * A 20,000-node report thus costs many turns of a few milliseconds, not one of a hundred (issue
 * 9), and what else the control plane has to do (a config change's fan-out) runs in between.
 */
export class HealthIntake {
  readonly #options: HealthIntakeOptions;
  readonly #work: OrderedWork;
  /** Refused or closed: reports not yet handed over are dropped, slice by slice. */
  #stopped = false;
  /** Reports taken and not yet handed over (or dropped). */
  #backlog = 0;

  constructor(options: HealthIntakeOptions) {
    this.#options = options;
    this.#work = new OrderedWork(options.turns ?? intakeTurns, (_key, error) =>
      this.#refuse(
        `NodeHealthReport could not be decoded: ${error instanceof Error ? error.message : String(error)}`,
        true,
      ),
    );
  }

  /** Takes `report` in after every report taken before. */
  take(report: HealthReportSource): void {
    if (this.#stopped) return;
    if (++this.#backlog === MAX_BACKLOG) this.#options.onBacklog?.(true);
    this.#work.run("reports", () => this.#counted(report));
  }

  /** A report's steps, counted out of the backlog however they end. */
  *#counted(report: HealthReportSource): Generator<number, void> {
    try {
      yield* this.#steps(report);
    } finally {
      if (this.#backlog-- === MAX_BACKLOG) this.#options.onBacklog?.(false);
    }
  }

  /** The stream is over: what it sent and was not handed over yet would only be ignored. */
  close(): void {
    this.#stopped = true;
  }

  /** Settles once every report taken so far was handed to the fleet (or refused). */
  idle(): Promise<void> {
    return this.#work.idle();
  }

  *#steps(report: HealthReportSource): Generator<number, void> {
    if (this.#stopped) return;
    const { changesOnly, nodeCount, removed } = report;
    const over = healthCountOver(nodeCount + (changesOnly ? removed.length : 0), changesOnly);
    if (over !== undefined) return this.#refuse(over);
    const nodes: ReportedNodeHealth[] = [];
    while (nodes.length < nodeCount) {
      yield Math.min(INTAKE_SLICE_ENTRIES, nodeCount - nodes.length);
      if (this.#stopped) return;
      const slice = report.nextNodes(INTAKE_SLICE_ENTRIES);
      if (slice.length === 0) break;
      const checked = checkNodes("nodes", slice, nodes.length);
      if (!checked.ok) return this.#refuse(checked.reason);
      for (const node of checked.value) nodes.push(node);
    }
    const { fleet, nodeId, stream } = this.#options;
    if (!changesOnly) {
      // State of the world: the report replaces whatever this data plane said before.
      fleet.healthReported(nodeId, stream, nodes);
      return;
    }
    const gone = checkNodes("removed", removed);
    if (!gone.ok) return this.#refuse(gone.reason);
    fleet.healthChangesReported(nodeId, stream, {
      nodes,
      removed: gone.value.map(({ upstream, address }) => ({ upstream, address })),
    });
  }

  #refuse(reason: string, undecodable = false): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#options.refuse(reason, undecodable);
  }
}
