import { create, fromBinary, type Snapshot, SnapshotSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { AppliedSnapshot } from "../runtime/applied-snapshot.js";
import { deltaOf, routeAt, snapshotOf } from "../testing/delta-fixture.js";
import {
  decodeCacheFile,
  encodeCacheFile,
  encodeCacheFileInTurns,
  encodeSnapshot,
} from "./cache-file.js";

const snapshot = create(SnapshotSchema, {
  version: 1234n,
  nonce: "n1234",
  breakers: [{ name: "default" }],
  upstreams: [
    { name: "agents", breaker: "default", nodes: [{ address: "10.0.0.5:8080", weight: 3 }] },
  ],
  routes: [{ name: "api", match: { pathPrefix: "/api" }, upstream: "agents" }],
});

function damaged(edit: (file: Buffer) => Buffer): ReturnType<typeof decodeCacheFile> {
  return decodeCacheFile(edit(Buffer.from(encodeCacheFile(snapshot))));
}

/**
 * Encodes `config` in turns with a clock that moves a whole turn per step, and counts the
 * event-loop turns that passed meanwhile (an immediate that re-arms itself until the end).
 */
async function encodeCountingTurns(config: Snapshot): Promise<{ file: Buffer; turns: number }> {
  let turns = 0;
  let encoding = true;
  const ticker = (): void => {
    if (!encoding) return;
    turns += 1;
    setImmediate(ticker);
  };
  setImmediate(ticker);
  let clock = 0;
  const file = await encodeCacheFileInTurns(config, { now: () => (clock += 10) });
  encoding = false;
  return { file, turns };
}

describe("cache file", () => {
  it("encodes a whole config across event-loop turns, to the same bytes", async () => {
    // Every resource encoded ends a turn.
    const big = snapshotOf(7, 200, 20);
    const { file, turns } = await encodeCountingTurns(big);
    expect(turns).toBeGreaterThan(100);
    expect(file.equals(encodeCacheFile(big))).toBe(true);
    const decoded = decodeCacheFile(file);
    expect(decoded.ok && decoded.snapshot).toEqual(big);
  });

  it("writes a config again in short turns when every resource is already encoded", async () => {
    // The save that follows a one-route delta: every resource's bytes are cached, yet walking,
    // copying and checksumming them all in one turn was the idle data plane's longest block.
    const big = snapshotOf(7, 200, 20);
    const first = encodeCacheFile(big);
    const { file: again, turns } = await encodeCountingTurns(big);
    // 222 resources taken and copied, a turn for each.
    expect(turns).toBeGreaterThanOrEqual(2 * 222);
    expect(again.equals(first)).toBe(true);
  });

  it("round-trips a snapshot with its version", () => {
    const decoded = decodeCacheFile(encodeCacheFile(snapshot));
    expect(decoded.ok).toBe(true);
    if (!decoded.ok) return;
    expect(decoded.version).toBe(1234);
    expect(decoded.snapshot).toEqual(snapshot);
  });

  it("encodes each snapshot of a delta chain as itself, reusing resources it shares", () => {
    const applied = new AppliedSnapshot();
    applied.apply(snapshotOf(1, 30, 5));
    for (let version = 2; version <= 4; version++) {
      const before = applied.current()!.source;
      expect(fromBinary(SnapshotSchema, encodeSnapshot(before))).toEqual(before);
      const changed = applied.applyDelta(
        deltaOf(version, { routes: [routeAt(version, 5, version)], removedRoutes: ["r-20"] }),
      );
      if (!changed.ok) throw new Error(changed.reason);
      const after = changed.value.source;
      const decoded = fromBinary(SnapshotSchema, encodeSnapshot(after));
      expect(decoded).toEqual(create(SnapshotSchema, { ...after }));
      expect(decoded.routes.find((r) => r.name === `r-${version}`)?.priority).toBe(version);
    }
  });

  it.each([
    ["an empty file", () => Buffer.alloc(0), /shorter than the header/],
    [
      "another file type",
      (f: Buffer) => Buffer.concat([Buffer.from("{}"), f]),
      /not a snapshot cache/,
    ],
    [
      "a flipped payload byte",
      (f: Buffer) => {
        f[f.length - 3]! ^= 0xff;
        return f;
      },
      /checksum mismatch/,
    ],
    ["a truncated write", (f: Buffer) => f.subarray(0, f.length - 5), /header says/],
    [
      "a future format",
      (f: Buffer) => {
        f.writeUInt32BE(2, 8);
        return f;
      },
      /unknown cache format 2/,
    ],
    [
      "a header version that disagrees with the payload",
      (f: Buffer) => {
        f.writeBigUInt64BE(9n, 12);
        return f;
      },
      /header version 9 != snapshot version 1234/,
    ],
  ])("refuses %s with a reason", (_name, edit, reason) => {
    const decoded = damaged(edit);
    expect(decoded.ok).toBe(false);
    if (!decoded.ok) expect(decoded.reason).toMatch(reason);
  });
});
