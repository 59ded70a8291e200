import { describe, expect, it } from "vitest";
import { parseH2loadOutput } from "./h2load-output.js";

const REPORT = `Application protocol: h2
finished in 2.02s, 2160.00 req/s, 65.48KB/s
requests: 4320 total, 4328 started, 4320 done, 4318 succeeded, 2 failed, 1 errored, 0 timeout
status codes: 4315 2xx, 0 3xx, 2 4xx, 1 5xx
traffic: 130.95KB (134094) total, 8.57KB (8778) headers (space savings 95.27%), 8.44KB (8640) data
`;

describe("parseH2loadOutput", () => {
  it("reads rate and counts from the report, percentiles from the request log", () => {
    // 100 requests taking 1..100 ms, out of order as h2load writes them per stream.
    const lines = Array.from(
      { length: 100 },
      (_, i) => `1796115416870175\t200\t${(100 - i) * 1000}`,
    );
    const result = parseH2loadOutput(REPORT, `${lines.join("\n")}\n`);
    expect(result).toEqual({
      requestsPerSecond: 2160,
      requests: 4320,
      p50Ms: 51,
      p99Ms: 100,
      errors: 2 + 1 + 2 + 1,
      errorKinds: "failed 2, errored 1, 4xx 2, 5xx 1",
    });
  });

  it("throws naming what is missing", () => {
    expect(() => parseH2loadOutput("no summary", "1\t200\t5\n")).toThrow(/summary/);
    expect(() => parseH2loadOutput(REPORT, "")).toThrow(/log is empty/);
  });
});
