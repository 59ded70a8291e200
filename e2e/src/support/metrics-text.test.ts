import { describe, expect, it } from "vitest";
import { metricSum, metricValue, parseMetrics } from "./metrics-text.js";

const TEXT = `# HELP clawgate_snapshot_version Version of the applied snapshot.
# TYPE clawgate_snapshot_version gauge
clawgate_snapshot_version 42
# TYPE clawgate_requests_total counter
clawgate_requests_total{route="api",upstream="agents",code="200"} 300
clawgate_requests_total{route="api",upstream="agents",code="503"} 2
clawgate_requests_total{route="other",upstream="other",code="200"} 7 1700000000000
clawgate_odd{label="with \\"quotes\\", commas"} +Inf
`;

describe("metrics text", () => {
  it("reads a plain gauge", () => {
    expect(metricValue(TEXT, "clawgate_snapshot_version")).toBe(42);
  });

  it("selects by a subset of labels and sums across the rest", () => {
    expect(metricValue(TEXT, "clawgate_requests_total", { route: "api", code: "503" })).toBe(2);
    expect(metricSum(TEXT, "clawgate_requests_total", { route: "api" })).toBe(302);
    expect(metricSum(TEXT, "clawgate_requests_total", { code: "200" })).toBe(307);
  });

  it("answers undefined for a metric that is not there", () => {
    expect(metricValue(TEXT, "clawgate_missing")).toBeUndefined();
    expect(metricValue(TEXT, "clawgate_snapshot")).toBeUndefined();
  });

  it("unescapes label values and reads +Inf", () => {
    expect(parseMetrics(TEXT).at(-1)).toEqual({
      name: "clawgate_odd",
      labels: { label: 'with "quotes", commas' },
      value: Number.POSITIVE_INFINITY,
    });
  });
});
