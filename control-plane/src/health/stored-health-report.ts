import { promisify } from "node:util";
import { constants, createDeflateRaw, inflateRaw } from "node:zlib";
import { z } from "zod";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { describeIssue } from "../resources/config-state.js";
import { INTAKE_SLICE_ENTRIES, intakeTurns, sliceAt } from "../turns/turn-budget.js";

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

/*
 * Deflating and inflating run on libuv's thread pool, not the event loop: at 20,000 nodes the
 * synchronous forms blocked it for tens of milliseconds per report, on every report of every
 * data plane. Callers keep one data plane's reports in order (one write at a time per data
 * plane; one read chain per data plane), so an older report still compressing never lands
 * after a newer one.
 */
const inflateRawAsync = promisify(inflateRaw);

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

/**
 * The stored value of a report: plain JSON, or deflated JSON when larger than
 * DEFLATE_ABOVE_BYTES. Rejects with HealthReportTooLarge when even that is too large.
 */
export async function encodeHealthReport(
  report: Omit<SharedHealthReport, "dataPlane">,
): Promise<string> {
  const head = JSON.stringify({
    replica: report.replica,
    reportedAt: new Date(report.reportedAtMs).toISOString(),
  });
  // The same JSON as one JSON.stringify of the whole report, written a slice of nodes at a time
  // within the intake's turn budget: at 20,000 nodes, stringifying and copying 3.5 MB in one go
  // blocked the event loop for tens of milliseconds, hundreds on a loaded machine (issue 9).
  const parts: Buffer[] = [Buffer.from(`${head.slice(0, -1)},"nodes":[`)];
  await intakeTurns.run(jsonOfNodes(report.nodes, parts));
  parts.push(Buffer.from("]}"));
  let bytes = 0;
  for (const part of parts) bytes += part.length;
  if (bytes <= DEFLATE_ABOVE_BYTES) return Buffer.concat(parts).toString("utf8");
  const deflated = (await deflateParts(parts)).toString("base64");
  const value = JSON.stringify({ deflated });
  if (value.length > MAX_STORED_REPORT_BYTES) {
    throw new HealthReportTooLarge(
      `health report of ${report.nodes.length} nodes is ${value.length} bytes deflated; the limit is ${MAX_STORED_REPORT_BYTES}`,
    );
  }
  return value;
}

/**
 * The parts deflated as one text, fed to zlib part by part: the whole JSON is never put
 * together on the event loop (copying 3.5 MB into one buffer stood out in bench:scale's
 * profile of a loaded machine). Level 1: a few milliseconds for megabytes, and most of the gain
 * on text this repetitive.
 */
function deflateParts(parts: readonly Buffer[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const deflate = createDeflateRaw({ level: constants.Z_BEST_SPEED });
    const out: Buffer[] = [];
    deflate.on("data", (chunk: Buffer) => out.push(chunk));
    deflate.on("error", reject);
    deflate.on("end", () => resolve(Buffer.concat(out)));
    for (const part of parts) deflate.write(part);
    deflate.end();
  });
}

/** Appends the JSON of `nodes` (comma-separated, no brackets) to `parts`, a slice per step. */
function* jsonOfNodes(
  nodes: readonly ReportedNodeHealth[],
  parts: Buffer[],
): Generator<number, void> {
  for (let start = 0; start < nodes.length; start += INTAKE_SLICE_ENTRIES) {
    yield sliceAt(start, nodes.length);
    const slice = nodes.slice(start, start + INTAKE_SLICE_ENTRIES).map((node) => ({
      upstream: node.upstream,
      address: node.address,
      state: node.state,
      evidence: node.evidence,
      // The wire's uint64 arrives as a bigint, which JSON cannot hold.
      changedAtMs: Number(node.changedAtMs),
    }));
    const text = JSON.stringify(slice).slice(1, -1);
    parts.push(Buffer.from(start === 0 || text === "" ? text : `,${text}`));
  }
}

/** The report's JSON text, inflated when it was stored deflated. */
async function reportText(value: string): Promise<string> {
  if (!value.startsWith('{"deflated":')) return value;
  const { deflated } = JSON.parse(value) as { deflated: string };
  return (await inflateRawAsync(Buffer.from(deflated, "base64"))).toString("utf8");
}

export type ParsedHealthReport =
  | { ok: true; report: SharedHealthReport }
  | { ok: false; reason: string };

/**
 * A stored value read back, or why it cannot be. The schema check stays zod's: measured at
 * about 1.5 ms for 20,000 nodes, against about 20 ms for JSON.parse of the same report.
 */
export async function parseHealthReport(
  dataPlane: string,
  value: string,
): Promise<ParsedHealthReport> {
  let json: unknown;
  try {
    json = JSON.parse(await reportText(value));
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
