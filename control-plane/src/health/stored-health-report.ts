import { z } from "zod";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { describeIssue } from "../resources/config-state.js";

/**
 * The value under a health report key. Not strict: a newer control plane may add fields. The
 * node states stay strings, as on the wire: readers skip the ones they do not know.
 */
export const storedHealthReportSchema = z.object({
  /** The control-plane replica the data plane sent the report to. */
  replica: z.string().min(1),
  /** ISO time that replica received the report; the newest received report wins. */
  reportedAt: z.iso.datetime(),
  nodes: z.array(
    z.object({
      upstream: z.string(),
      address: z.string(),
      state: z.string(),
      evidence: z.string(),
      changedAtMs: z.number(),
    }),
  ),
});

/** A data plane's node-health report as the replicas share it. */
export interface SharedHealthReport {
  dataPlane: string;
  replica: string;
  reportedAtMs: number;
  nodes: readonly ReportedNodeHealth[];
}

export function encodeHealthReport(report: Omit<SharedHealthReport, "dataPlane">): string {
  return JSON.stringify({
    replica: report.replica,
    reportedAt: new Date(report.reportedAtMs).toISOString(),
    nodes: report.nodes.map((node) => ({
      upstream: node.upstream,
      address: node.address,
      state: node.state,
      evidence: node.evidence,
      // The wire's uint64 arrives as a bigint, which JSON cannot hold.
      changedAtMs: Number(node.changedAtMs),
    })),
  });
}

export function parseHealthReport(
  dataPlane: string,
  value: string,
): { ok: true; report: SharedHealthReport } | { ok: false; reason: string } {
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch {
    return { ok: false, reason: "not JSON" };
  }
  const parsed = storedHealthReportSchema.safeParse(json);
  if (!parsed.success) {
    return { ok: false, reason: parsed.error.issues.map(describeIssue).join("; ") };
  }
  const { replica, reportedAt, nodes } = parsed.data;
  return { ok: true, report: { dataPlane, replica, reportedAtMs: Date.parse(reportedAt), nodes } };
}
