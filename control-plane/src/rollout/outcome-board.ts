import type { DataPlaneRecords } from "../replicas/data-plane-records.js";
import type { Counts } from "./rollout-verdict.js";

/**
 * The latest OutcomeReport of every data plane, whichever replica it streams from (the shared
 * data-plane records): cumulative counts per version, replaced whole by each report. Sums over a
 * set of data planes feed the rollout's verdict.
 */
export class OutcomeBoard {
  readonly #records: Pick<DataPlaneRecords, "get" | "nodes">;

  constructor(records: Pick<DataPlaneRecords, "get" | "nodes">) {
    this.#records = records;
  }

  /** One data plane's counts on `version` (zero when it reported none). */
  of(nodeId: string, version: number): Counts {
    const outcome = this.#records.get(nodeId)?.outcomes.find((o) => o.version === version);
    return outcome === undefined
      ? { requests: 0, failures: 0 }
      : { requests: outcome.requests, failures: outcome.failures };
  }

  /** Data planes connected to any replica, whether they reported anything yet or not. */
  nodes(): string[] {
    return this.#records.nodes();
  }
}
