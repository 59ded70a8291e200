import type { ReportedOutcome } from "../grpc/stream-session.js";
import type { Counts } from "./rollout-verdict.js";

/**
 * The latest OutcomeReport of each data plane connected here: cumulative counts per version,
 * replaced whole by each report. Sums over a set of data planes feed the rollout's verdict.
 */
export class OutcomeBoard {
  readonly #byNode = new Map<string, Map<number, Counts>>();

  report(nodeId: string, versions: readonly ReportedOutcome[]): void {
    this.#byNode.set(
      nodeId,
      new Map(versions.map((v) => [v.version, { requests: v.requests, failures: v.failures }])),
    );
  }

  /** One data plane's counts on `version` (zero when it reported none). */
  of(nodeId: string, version: number): Counts {
    return this.#byNode.get(nodeId)?.get(version) ?? { requests: 0, failures: 0 };
  }

  /** Data planes that reported anything. */
  nodes(): string[] {
    return [...this.#byNode.keys()];
  }
}
