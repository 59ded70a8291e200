import { describe, expect, it } from "vitest";
import { parseWrkOutput } from "./wrk-output.js";

const SAMPLE = `Running 10s test @ http://127.0.0.1:41000/
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   1.21ms  310.22us   9.87ms   91.02%
    Req/Sec    26.61k     1.02k   28.40k    70.00%
  Latency Distribution
     50%  1.14ms
     75%  1.27ms
     90%  1.46ms
     99%  2.50ms
  264856 requests in 10.00s, 305.76MB read
  Socket errors: connect 0, read 3, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:  26483.91
Transfer/sec:     30.57MB
`;

describe("parseWrkOutput", () => {
  it("reads requests/s, p50, p99 and counts every kind of error", () => {
    expect(parseWrkOutput(SAMPLE)).toEqual({
      requestsPerSecond: 26483.91,
      requests: 264856,
      p50Ms: 1.14,
      p99Ms: 2.5,
      errors: 11,
      errorKinds: "non-2xx 7, read 3, timeout 1",
    });
  });

  it("says no error kind when the run had none", () => {
    const clean = SAMPLE.replace(/ {2}Socket errors.*\n {2}Non-2xx.*\n/, "");
    expect(parseWrkOutput(clean)).toMatchObject({ errors: 0, errorKinds: "" });
  });

  it("converts microseconds and seconds to milliseconds", () => {
    const text = SAMPLE.replace("50%  1.14ms", "50%  635.00us").replace(
      "99%  2.50ms",
      "99%  1.20s",
    );
    const result = parseWrkOutput(text);
    expect(result.p50Ms).toBeCloseTo(0.635, 6);
    expect(result.p99Ms).toBe(1200);
  });

  it("refuses output without a latency distribution", () => {
    expect(() => parseWrkOutput(SAMPLE.replace(/ {5}99%.*\n/, ""))).toThrow(/99% latency/);
  });
});
