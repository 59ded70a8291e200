import type { NodeHealth, NodeHealthReport } from "@clawgate/proto";
import type { Fleet, ReportedNodeHealth, StreamToken } from "../fleet/fleet.js";
import { OrderedWork } from "../turns/ordered-work.js";
import {
  INTAKE_SLICE_ENTRIES,
  intakeTurns,
  type Step,
  type TurnBudget,
} from "../turns/turn-budget.js";
import { checkNodes, healthCountOver } from "./request-bounds.js";

/**
 * A node-health report to take in: a ReceivedHealthReport (bytes decoded a slice at a time) or
 * one decoded whole (a newer data plane's, with fields only fromBinary keeps).
 */
export interface HealthReportSource {
  readonly changesOnly: boolean;
  /** The report's size on the wire (or about it), counted in the intake's backlog. */
  readonly byteLength: number;
  readonly nodeCount: number;
  readonly removed: readonly NodeHealth[];
  /** The next at most `max` nodes; an empty list once every node was read. */
  nextNodes(max: number): NodeHealth[];
}

/**
 * About the bytes a node takes on the wire beyond its strings: five tags, four lengths and a
 * millisecond time as a varint.
 */
const NODE_OVERHEAD_BYTES = 18;

/** About the wire size of `nodes`, for a report that was decoded whole and kept no bytes. */
function wireSize(nodes: readonly NodeHealth[]): number {
  let bytes = 0;
  for (const node of nodes) {
    bytes +=
      NODE_OVERHEAD_BYTES +
      node.upstream.length +
      node.address.length +
      node.state.length +
      node.evidence.length;
  }
  return bytes;
}

/** A report decoded whole, read as a source. */
export function decodedReport(report: NodeHealthReport): HealthReportSource {
  let read = 0;
  return {
    changesOnly: report.changesOnly,
    byteLength: wireSize(report.nodes) + wireSize(report.removed),
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
   * Called when the bytes of the reports taken and not yet taken in by the fleet reach
   * MAX_BACKLOG_BYTES (true) and when they fall back under it (false): the stream stops reading
   * meanwhile, so a data plane that sends faster than the control plane takes in waits in its
   * own transport instead of growing this process's memory.
   */
  onBacklog?: (full: boolean) => void;
}

/**
 * Bytes of one stream's reports waiting (taken, not yet taken in by the fleet) at which it stops
 * reading (see onBacklog). Counted in bytes, not reports: a changes-only report of one node is
 * about 70 bytes and thousands of them never stop a stream, while a whole 20,000-node report
 * (issue 9's scale) is about 1.4 MiB on the wire, so a flood of those stops it at the third
 * waiting. Pausing stops the stream's 'data' events, not grpc-js's reads: its object-mode
 * stream buffers up to 16 more messages (its default highWaterMark) before it stops reading and
 * HTTP/2 flow control holds the data plane back. So a paused stream holds at most this, plus
 * those 16 messages (each under the 8 MiB max_receive_message_length), plus the report being
 * taken in: bounded, though not by this figure alone. A data plane's usual burst, its whole
 * view after Hello and its first changes, stays under it.
 */
export const MAX_BACKLOG_BYTES = 4 * 1024 * 1024;

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
  /** Refused or closed: reports not yet handed over are dropped. */
  #stopped = false;
  /** Bytes of the reports taken and not yet taken in by the fleet (or dropped). */
  #backlogBytes = 0;
  /** What onBacklog was last told. */
  #full = false;

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
    const bytes = report.byteLength;
    this.#backlogBytes += bytes;
    this.#work.run("reports", () => this.#counted(report, bytes));
    // After the run: a report taken in at once never stops the stream, however big.
    this.#tellBacklog();
  }

  /** A report's steps, counted out of the backlog however they end. */
  *#counted(report: HealthReportSource, bytes: number): Generator<Step, void> {
    try {
      yield* this.#steps(report);
    } finally {
      this.#backlogBytes -= bytes;
      this.#tellBacklog();
    }
  }

  #tellBacklog(): void {
    const full = this.#backlogBytes >= MAX_BACKLOG_BYTES;
    if (full === this.#full) return;
    this.#full = full;
    this.#options.onBacklog?.(full);
  }

  /**
   * The stream is over: what it sent and the fleet has not yet been handed is dropped (a report
   * handed over is taken in by the fleet whatever happens to the stream).
   */
  close(): void {
    this.#stopped = true;
    void this.#work.close();
  }

  /**
   * Settles once every report taken so far was taken in by the fleet (or refused, or dropped by
   * close()).
   */
  idle(): Promise<void> {
    return this.#work.idle();
  }

  *#steps(report: HealthReportSource): Generator<Step, void> {
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
    let taken: Promise<void> | undefined;
    if (!changesOnly) {
      // State of the world: the report replaces whatever this data plane said before.
      taken = fleet.healthReported(nodeId, stream, nodes);
    } else {
      const gone = checkNodes("removed", removed);
      if (!gone.ok) return this.#refuse(gone.reason);
      taken = fleet.healthChangesReported(nodeId, stream, {
        nodes,
        removed: gone.value.map(({ upstream, address }) => ({ upstream, address })),
      });
    }
    // The next report is handed over only once the fleet has taken this one in, and this one
    // counts in the backlog until then: so the backlog bounds what waits in the fleet's queue
    // too, and one stream never has more than one report there (FleetHealth.report).
    if (taken !== undefined) yield taken;
  }

  #refuse(reason: string, undecodable = false): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#options.refuse(reason, undecodable);
  }
}
