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

  /**
   * One data plane's counts summed over the versions from `from` up to, not including, `to`
   * (zero when it reported none). A range, not one version: a config is published at the store
   * revision the snapshot was built at, which other writes (registrations, journal) may have
   * moved past the revision of the config's own write.
   */
  of(nodeId: string, from: number, to = Number.POSITIVE_INFINITY): Counts {
    const counts = { requests: 0, failures: 0 };
    for (const outcome of this.#records.get(nodeId)?.outcomes ?? []) {
      if (outcome.version < from || outcome.version >= to) continue;
      counts.requests += outcome.requests;
      counts.failures += outcome.failures;
    }
    return counts;
  }

  /**
   * The version from `from` on that `nodeId` last refused (NACKed), with its reason; undefined
   * when it refused none of them (or has no record).
   */
  refused(nodeId: string, from: number): { version: number; error: string } | undefined {
    const nack = this.#records.get(nodeId)?.dataPlane?.lastNack;
    return nack !== undefined && nack.version >= from
      ? { version: nack.version, error: nack.error }
      : undefined;
  }

  /** Data planes connected to any replica, whether they reported anything yet or not. */
  nodes(): string[] {
    return this.#records.nodes();
  }
}
