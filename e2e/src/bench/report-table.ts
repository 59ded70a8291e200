import type { WrkResult } from "./wrk-output.js";

export interface Measured {
  target: string;
  result: WrkResult;
  /** The proxy's own cost; absent for the direct run. */
  usage?: { cpuMicrosPerRequest: number; residentMiB: number };
  /** How many of the target's rounds had errors, of how many; absent: only this run. */
  erroredRounds?: { count: number; of: number };
}

/** The floor every proxy is compared with, and the well-known Node proxy. */
const FLOOR = "minimal";
const PEER = "fastify-proxy";

/**
 * A plain-text table of every target: throughput, latency and the proxy's CPU time per request
 * and memory, with ratios to the minimal undici dispatch proxy (the floor of what Node can do:
 * CPU, p99 and RSS) and throughput against @fastify/http-proxy.
 */
export function formatReport(rows: Measured[]): string {
  const floor = rows.find((row) => row.target === FLOOR);
  const peer = rows.find((row) => row.target === PEER)?.result;
  const ratio = (value: number | undefined, base: number | undefined) =>
    value === undefined || base === undefined || base === 0 ? "-" : `${(value / base).toFixed(2)}x`;
  const header = [
    "target",
    "req/s",
    "p50 ms",
    "p99 ms",
    "CPU us/req",
    "RSS MiB",
    "errors",
    "req/s vs fastify",
    "CPU vs minimal",
    "p99 vs minimal",
    "RSS vs minimal",
  ];
  const body = rows.map(({ target, result, usage }) => [
    target,
    result.requestsPerSecond.toFixed(0),
    result.p50Ms.toFixed(2),
    result.p99Ms.toFixed(2),
    usage === undefined ? "-" : usage.cpuMicrosPerRequest.toFixed(0),
    usage === undefined ? "-" : usage.residentMiB.toFixed(0),
    String(result.errors),
    ratio(result.requestsPerSecond, peer?.requestsPerSecond),
    ratio(usage?.cpuMicrosPerRequest, floor?.usage?.cpuMicrosPerRequest),
    ratio(result.p99Ms, floor?.result.p99Ms),
    ratio(usage?.residentMiB, floor?.usage?.residentMiB),
  ]);
  const widths = header.map((title, i) =>
    Math.max(title.length, ...body.map((cells) => cells[i]!.length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join("  ");
  return [
    line(header),
    widths.map((w) => "-".repeat(w)).join("  "),
    ...body.map(line),
    ...errorNotes(rows),
  ].join("\n");
}

/**
 * A note under the table for each target that had errors, in its reported round or any other:
 * a row whose requests partly failed (a timeout, a 5xx) measured something else than the rest,
 * so neither it nor a ratio to it is a baseline.
 */
export function errorNotes(rows: readonly Measured[]): string[] {
  const notes: string[] = [];
  for (const { target, result, erroredRounds } of rows) {
    const rounds = erroredRounds === undefined ? 0 : erroredRounds.count;
    if (result.errors === 0 && rounds === 0) continue;
    const reported =
      result.errors === 0
        ? "none in the reported round"
        : `${result.errors} (${result.errorKinds})`;
    const inRounds =
      erroredRounds === undefined ? "" : `, in ${rounds} of ${erroredRounds.of} rounds`;
    notes.push(`! ${target} had errors: ${reported}${inRounds}; not a baseline`);
  }
  return notes;
}
