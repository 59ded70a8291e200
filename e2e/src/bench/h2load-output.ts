import { describeErrorKinds, type WrkResult } from "./wrk-output.js";

/**
 * An h2load run as the bench tables read a wrk run: requests/s and the request count from its
 * text report ("finished in ..., N req/s", "requests: N total, ... N succeeded, N failed,
 * N errored, N timeout", "status codes: N 2xx, ..."), and p50/p99 from its --log-file, whose
 * third tab-separated column is each request's microseconds to the end of its response
 * (h2load's report has no percentiles). Errors count failed, errored and timed-out requests
 * and answers other than 2xx and 3xx. Throws when a number it needs is missing.
 */
export function parseH2loadOutput(report: string, requestLog: string): WrkResult {
  const rate = /finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(report);
  const counts =
    /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(
      report,
    );
  const statuses = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(report);
  if (rate === null || counts === null || statuses === null) {
    throw new Error(`h2load report without its summary lines:\n${report}`);
  }
  const micros: number[] = [];
  for (const line of requestLog.split("\n")) {
    const column = line.split("\t")[2];
    if (column !== undefined && column !== "") micros.push(Number(column));
  }
  if (micros.length === 0) throw new Error("h2load request log is empty");
  micros.sort((a, b) => a - b);
  const percentile = (p: number) =>
    micros[Math.min(micros.length - 1, Math.floor((p / 100) * micros.length))]! / 1000;
  const kinds = {
    failed: Number(counts[4]),
    errored: Number(counts[5]),
    timeout: Number(counts[6]),
    "4xx": Number(statuses[3]),
    "5xx": Number(statuses[4]),
  };
  return {
    requestsPerSecond: Number(rate[1]),
    requests: Number(counts[2]),
    p50Ms: percentile(50),
    p99Ms: percentile(99),
    errors: Object.values(kinds).reduce((sum, n) => sum + n, 0),
    errorKinds: describeErrorKinds(kinds),
  };
}
