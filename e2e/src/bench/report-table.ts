import { sameRoundRatio } from "./same-round-ratio.js";
import type { WrkResult } from "./wrk-output.js";

/** What one wrk run of one target measured. */
export interface RoundFigures {
  result: WrkResult;
  /** The proxy's own cost; absent for the direct run. */
  usage?: { cpuMicrosPerRequest: number; residentMiB: number };
}

export interface Measured extends RoundFigures {
  target: string;
  /** How many of the target's rounds had errors, of how many; absent: only this run. */
  erroredRounds?: { count: number; of: number };
  /**
   * Every round's figures, in round order (the same order for every target), from which the
   * ratio columns are read round by round; absent: the ratios compare the reported rows.
   */
  rounds?: readonly RoundFigures[];
}

/** The floor every proxy is compared with, and the well-known Node proxy. */
const FLOOR = "minimal";
const PEER = "fastify-proxy";

/**
 * A plain-text table of every target: throughput, latency and the proxy's CPU time per request
 * and memory, with ratios to the minimal undici dispatch proxy (the floor of what Node can do:
 * CPU, p99, RSS and throughput) and throughput against @fastify/http-proxy. Where rows carry
 * their rounds, each ratio is the median over rounds of that round's ratio (sameRoundRatio).
 */
export function formatReport(rows: Measured[]): string {
  const floor = rows.find((row) => row.target === FLOOR);
  const peer = rows.find((row) => row.target === PEER);
  const ratio = (
    row: Measured,
    base: Measured | undefined,
    figure: (figures: RoundFigures) => number | undefined,
  ): string => {
    if (base === undefined) return "-";
    const value =
      row.rounds !== undefined && base.rounds !== undefined
        ? sameRoundRatio(row.rounds.map(figure), base.rounds.map(figure))
        : sameRoundRatio([figure(row)], [figure(base)]);
    return value === undefined ? "-" : `${value.toFixed(2)}x`;
  };
  const rps = (figures: RoundFigures) => figures.result.requestsPerSecond;
  const cpu = (figures: RoundFigures) => figures.usage?.cpuMicrosPerRequest;
  const p99 = (figures: RoundFigures) => figures.result.p99Ms;
  const rss = (figures: RoundFigures) => figures.usage?.residentMiB;
  const header = [
    "target",
    "req/s",
    "p50 ms",
    "p99 ms",
    "CPU us/req",
    "RSS MiB",
    "errors",
    "req/s vs fastify",
    "req/s vs minimal",
    "CPU vs minimal",
    "p99 vs minimal",
    "RSS vs minimal",
  ];
  const body = rows.map((row) => [
    row.target,
    row.result.requestsPerSecond.toFixed(0),
    row.result.p50Ms.toFixed(2),
    row.result.p99Ms.toFixed(2),
    row.usage === undefined ? "-" : row.usage.cpuMicrosPerRequest.toFixed(0),
    row.usage === undefined ? "-" : row.usage.residentMiB.toFixed(0),
    String(row.result.errors),
    ratio(row, peer, rps),
    ratio(row, floor, rps),
    ratio(row, floor, cpu),
    ratio(row, floor, p99),
    ratio(row, floor, rss),
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
