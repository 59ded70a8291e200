/** What one wrk run measured. */
export interface WrkResult {
  requestsPerSecond: number;
  /** Requests completed over the whole run. */
  requests: number;
  /** Latency percentiles in milliseconds, from --latency. */
  p50Ms: number;
  p99Ms: number;
  /** Non-2xx/3xx responses plus socket errors of every kind. */
  errors: number;
  /** What those errors were, e.g. `non-2xx 7, read 3, timeout 1`; empty when there were none. */
  errorKinds: string;
}

/** `name count` for each kind that happened, comma-separated: the table's note on a row. */
export function describeErrorKinds(counts: Readonly<Record<string, number>>): string {
  return Object.entries(counts)
    .filter(([, count]) => count > 0)
    .map(([kind, count]) => `${kind} ${count}`)
    .join(", ");
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 };

/** Parses wrk 4's text report (run with --latency). Throws when a number it needs is missing. */
export function parseWrkOutput(text: string): WrkResult {
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(text);
  if (rps === null) throw new Error(`no Requests/sec in wrk output:\n${text}`);
  const total = /(\d+) requests in /.exec(text);
  if (total === null) throw new Error(`no request count in wrk output:\n${text}`);
  const nonSuccess = /Non-2xx or 3xx responses:\s+(\d+)/.exec(text);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text);
  const [connect, read, write, timeout] = (socket?.slice(1) ?? []).map(Number);
  const kinds = {
    "non-2xx": Number(nonSuccess?.[1] ?? 0),
    connect: connect ?? 0,
    read: read ?? 0,
    write: write ?? 0,
    timeout: timeout ?? 0,
  };
  return {
    requestsPerSecond: Number(rps[1]),
    requests: Number(total[1]),
    p50Ms: percentile(text, 50),
    p99Ms: percentile(text, 99),
    errors: Object.values(kinds).reduce((sum, n) => sum + n, 0),
    errorKinds: describeErrorKinds(kinds),
  };
}

function percentile(text: string, p: number): number {
  const match = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, "m").exec(text);
  if (match === null) throw new Error(`no ${p}% latency in wrk output (ran without --latency?)`);
  return Number(match[1]) * UNIT_MS[match[2]!]!;
}
