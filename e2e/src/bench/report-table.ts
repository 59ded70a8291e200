import type { WrkResult } from "./wrk-output.js";

export interface Measured {
  target: string;
  result: WrkResult;
  /** The proxy's own cost; absent for the direct run. */
  usage?: { cpuMicrosPerRequest: number; residentMiB: number };
}

/**
 * A plain-text table of every target with its throughput and p99 as ratios to the direct run
 * (what the proxy costs) and to nginx (how it compares with a well-known proxy).
 */
export function formatReport(rows: Measured[]): string {
  const direct = rows.find((row) => row.target === "direct")?.result;
  const nginx = rows.find((row) => row.target === "nginx")?.result;
  const ratio = (value: number, base: number | undefined) =>
    base === undefined || base === 0 ? "-" : `${(value / base).toFixed(2)}x`;
  const header = [
    "target",
    "req/s",
    "p50 ms",
    "p99 ms",
    "req/s vs direct",
    "req/s vs nginx",
    "p99 vs direct",
    "p99 vs nginx",
    "CPU us/req",
    "RSS MiB",
    "errors",
  ];
  const body = rows.map(({ target, result, usage }) => [
    target,
    result.requestsPerSecond.toFixed(0),
    result.p50Ms.toFixed(2),
    result.p99Ms.toFixed(2),
    ratio(result.requestsPerSecond, direct?.requestsPerSecond),
    ratio(result.requestsPerSecond, nginx?.requestsPerSecond),
    ratio(result.p99Ms, direct?.p99Ms),
    ratio(result.p99Ms, nginx?.p99Ms),
    usage === undefined ? "-" : usage.cpuMicrosPerRequest.toFixed(0),
    usage === undefined ? "-" : usage.residentMiB.toFixed(0),
    String(result.errors),
  ]);
  const widths = header.map((title, i) =>
    Math.max(title.length, ...body.map((cells) => cells[i]!.length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...body.map(line)].join("\n");
}
