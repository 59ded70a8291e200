/** A node's state as one data plane's probes see it. */
export const NODE_HEALTH_STATES = ["healthy", "quarantined", "evicted"] as const;
export type NodeHealthState = (typeof NODE_HEALTH_STATES)[number];

/**
 * What the data planes that report on a node agree on: the state more than half of them
 * report, "split" when no state has a majority, "unreported" when none reports the node.
 */
export type MajorityVerdict = NodeHealthState | "split" | "unreported";

export type StateCounts = Record<NodeHealthState, number>;

export function isNodeHealthState(value: string): value is NodeHealthState {
  return (NODE_HEALTH_STATES as readonly string[]).includes(value);
}

export function emptyCounts(): StateCounts {
  return { healthy: 0, quarantined: 0, evicted: 0 };
}

/** A strict majority: with two reporters, one evicted and one healthy is "split", not evicted. */
export function majorityOf(counts: StateCounts): MajorityVerdict {
  const total = counts.healthy + counts.quarantined + counts.evicted;
  if (total === 0) return "unreported";
  for (const state of NODE_HEALTH_STATES) {
    if (counts[state] * 2 > total) return state;
  }
  return "split";
}
