import { randomBytes } from "node:crypto";
import { inflateRawSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { evictedNodes } from "../testing/evicted-nodes.js";
import {
  DEFLATE_ABOVE_BYTES,
  encodeHealthReport,
  HealthReportTooLarge,
  MAX_STORED_REPORT_BYTES,
  parseHealthReport,
} from "./stored-health-report.js";

/** etcd's default --max-request-bytes: a value over it can never be written. */
const ETCD_DEFAULT_MAX_REQUEST_BYTES = 1.5 * 1024 * 1024;

function inflatedLength(value: string): number {
  const { deflated } = JSON.parse(value) as { deflated: string };
  return inflateRawSync(Buffer.from(deflated, "base64")).length;
}

describe("stored health reports", () => {
  it.each([0, 1, 999, 1_000, 1_001, 2_500])(
    "encode %i nodes, in slices, as the JSON of the whole report",
    async (count) => {
      const nodes = evictedNodes(count, (i) => `status "down" é ${i}`);
      const value = await encodeHealthReport({ replica: "cp-1", reportedAtMs: 0, nodes });
      expect(await parseHealthReport("dp-1", value)).toEqual({
        ok: true,
        report: {
          dataPlane: "dp-1",
          replica: "cp-1",
          reportedAtMs: 0,
          nodes: nodes.map((node) => ({ ...node, changedAtMs: Number(node.changedAtMs) })),
        },
      });
    },
  );

  it("keep a small report as plain JSON", async () => {
    const value = await encodeHealthReport({
      replica: "cp-1",
      reportedAtMs: 0,
      nodes: evictedNodes(3),
    });
    expect(value.length).toBeLessThan(DEFLATE_ABOVE_BYTES);
    expect(JSON.parse(value).nodes).toHaveLength(3);
  });

  it("store a 20,000-node report deflated within etcd's request limit, and read it back whole", async () => {
    const nodes = evictedNodes(20_000);
    const value = await encodeHealthReport({ replica: "cp-1", reportedAtMs: 1_000, nodes });
    const plainBytes = inflatedLength(value);

    expect(plainBytes).toBeGreaterThan(ETCD_DEFAULT_MAX_REQUEST_BYTES);
    expect(value.startsWith('{"deflated":')).toBe(true);
    expect(value.length).toBeLessThanOrEqual(MAX_STORED_REPORT_BYTES);

    const parsed = await parseHealthReport("dp-1", value);
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.report.replica).toBe("cp-1");
    expect(parsed.report.nodes).toHaveLength(20_000);
    expect(parsed.report.nodes[19_999]).toEqual({
      ...nodes[19_999],
      changedAtMs: Number(nodes[19_999]!.changedAtMs),
    });
  });

  it("refuse a report that stays too large deflated, rather than fail every write", async () => {
    const noise = () => randomBytes(96).toString("base64");
    await expect(
      encodeHealthReport({ replica: "cp-1", reportedAtMs: 0, nodes: evictedNodes(20_000, noise) }),
    ).rejects.toThrow(HealthReportTooLarge);
  });

  it("name a value that is neither JSON nor deflated JSON", async () => {
    expect(await parseHealthReport("dp-1", '{"deflated":"bm90IGRlZmxhdGVk"}')).toMatchObject({
      ok: false,
    });
  });
});
