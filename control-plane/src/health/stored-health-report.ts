import { constants, deflateRawSync, inflateRawSync } from "node:zlib";
import { z } from "zod";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { describeIssue } from "../resources/config-state.js";

/**
 * The value under a health report key. Not strict: a newer control plane may add fields. The
 * node states stay strings, as on the wire: readers skip the ones they do not know.
 */
/**
 * Reports larger than this are stored deflated. A data plane reports every node it routes to,
 * and at 20,000 nodes the JSON is about 3.5 MB: over etcd's default 1.5 MiB request limit, and
 * etcd's client counts that refusal as a failure of the host, so its breaker would then refuse
 * config writes too. The node list is repetitive and deflates about tenfold; small reports stay
 * plain JSON, readable with etcdctl.
 */
export const DEFLATE_ABOVE_BYTES = 256 * 1024;
/** Largest value written: under etcd's default --max-request-bytes (1.5 MiB) with room. */
export const MAX_STORED_REPORT_BYTES = 1024 * 1024;

/** A report too large to share even deflated; the replica keeps it and says so. */
export class HealthReportTooLarge extends Error {
  readonly code = "CLAWGATE_HEALTH_REPORT_TOO_LARGE";
}

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
  const json = JSON.stringify({
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
  if (json.length <= DEFLATE_ABOVE_BYTES) return json;
  // Level 1: a few milliseconds for megabytes, and most of the gain on text this repetitive.
  const deflated = deflateRawSync(json, { level: constants.Z_BEST_SPEED }).toString("base64");
  const value = JSON.stringify({ deflated });
  if (value.length > MAX_STORED_REPORT_BYTES) {
    throw new HealthReportTooLarge(
      `health report of ${report.nodes.length} nodes is ${value.length} bytes deflated; the limit is ${MAX_STORED_REPORT_BYTES}`,
    );
  }
  return value;
}

/** The report's JSON text, inflated when it was stored deflated. */
function reportText(value: string): string {
  if (!value.startsWith('{"deflated":')) return value;
  const { deflated } = JSON.parse(value) as { deflated: string };
  return inflateRawSync(Buffer.from(deflated, "base64")).toString("utf8");
}

export function parseHealthReport(
  dataPlane: string,
  value: string,
): { ok: true; report: SharedHealthReport } | { ok: false; reason: string } {
  let json: unknown;
  try {
    json = JSON.parse(reportText(value));
  } catch {
    return { ok: false, reason: "not JSON, or not deflated JSON" };
  }
  const parsed = storedHealthReportSchema.safeParse(json);
  if (!parsed.success) {
    return { ok: false, reason: parsed.error.issues.map(describeIssue).join("; ") };
  }
  const { replica, reportedAt, nodes } = parsed.data;
  return { ok: true, report: { dataPlane, replica, reportedAtMs: Date.parse(reportedAt), nodes } };
}
