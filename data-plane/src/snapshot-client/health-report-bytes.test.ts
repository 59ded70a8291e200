import {
  create,
  fromBinary,
  NodeHealthSchema,
  StreamSnapshotsRequestSchema,
  toBinary,
} from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { encodeNodeHealth, HealthReportEncoder } from "./health-report-bytes.js";

const node = (address: string, state: string, evidence = "", changedAtMs = 0n) =>
  create(NodeHealthSchema, { upstream: "agents", address, state, evidence, changedAtMs });

describe("health report encoding", () => {
  it.each([
    ["every field", node("127.0.0.1:80", "evicted", "error ECONNREFUSED", 1_700_000_000_123n)],
    ["empty strings and a zero time", node("", "healthy")],
    ["non-ASCII evidence", node("[::1]:8080", "quarantined", "héllo ✓ 200", 1n)],
    ["a time past 2^32", node("a:1", "healthy", "", 2n ** 40n + 7n)],
  ])("encodes a node as toBinary does: %s", (_, value) => {
    expect(Buffer.from(encodeNodeHealth(value))).toEqual(
      Buffer.from(toBinary(NodeHealthSchema, value)),
    );
  });

  it("frames a report that decodes to the nodes given, reused or not", () => {
    const encoder = new HealthReportEncoder();
    const nodes = Array.from({ length: 300 }, (_, i) =>
      node(`10.0.${i >> 8}.${i & 255}:80`, i % 3 === 0 ? "evicted" : "healthy", "tcp 1ms", 5n),
    );
    encoder.encode(nodes);
    // Half the nodes change: their new objects are encoded, the rest come from the cache.
    const next = nodes.map((n, i) => (i % 2 === 0 ? node(n.address, "quarantined") : n));
    const decoded = fromBinary(StreamSnapshotsRequestSchema, encoder.encode(next));
    expect(decoded.message.case).toBe("health");
    expect(decoded.message.value).toEqual(
      create(StreamSnapshotsRequestSchema, { message: { case: "health", value: { nodes: next } } })
        .message.value,
    );
  });

  it("encodes a 20,000-node report over several event-loop turns, to the same bytes", async () => {
    const nodes = Array.from({ length: 20_000 }, (_, i) =>
      node(`10.1.${i >> 8}.${i & 255}:80`, "evicted", "error ECONNREFUSED", 7n),
    );
    let turns = 0;
    let encoding = true;
    const tick = () => {
      turns++;
      if (encoding) setImmediate(tick);
    };
    setImmediate(tick);
    const inTurns = await new HealthReportEncoder().encodeInTurns(nodes);
    encoding = false;
    // equals(), not toEqual(): a deep compare of 1.4 MB byte by byte takes half a minute.
    expect(Buffer.from(inTurns).equals(new HealthReportEncoder().encode(nodes))).toBe(true);
    // In one turn, every other task waited for all 20,000 nodes.
    expect(turns).toBeGreaterThanOrEqual(10);
  });

  it("frames a changes-only report that decodes to its changes, removed and flag, in one turn or several", async () => {
    const changes = {
      nodes: [node("10.0.0.1:80", "quarantined", "", 2n), node("10.0.0.1:80", "evicted", "x", 3n)],
      removed: [create(NodeHealthSchema, { upstream: "agents", address: "10.0.0.2:80" })],
    };
    const expected = create(StreamSnapshotsRequestSchema, {
      message: { case: "health", value: { changesOnly: true, ...changes } },
    });
    const encoder = new HealthReportEncoder();
    const once = encoder.encodeChanges(changes);
    expect(fromBinary(StreamSnapshotsRequestSchema, once)).toEqual(expected);
    expect(Buffer.from(await encoder.encodeChangesInTurns(changes)).equals(once)).toBe(true);
    // No change at all still says changes_only, so it never reads as an empty whole view.
    const empty = fromBinary(
      StreamSnapshotsRequestSchema,
      encoder.encodeChanges({ nodes: [], removed: [] }),
    );
    expect(empty.message.case === "health" && empty.message.value.changesOnly).toBe(true);
  });
});
