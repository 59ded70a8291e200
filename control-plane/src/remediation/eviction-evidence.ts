import type { NodeHealthSummary } from "../health/fleet-health.js";

/** "evicted by 2 of 3 data planes: <what the first one's probe saw>". */
export function evictionEvidence(node: NodeHealthSummary): string {
  const first = node.reports.find((report) => report.state === "evicted" && report.evidence !== "");
  const seen = first === undefined ? "" : `: ${first.evidence}`;
  return `evicted by ${node.evicted} of ${node.total} data planes${seen}`;
}
