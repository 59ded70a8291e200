import { create, RouteSchema, SnapshotSchema, toBinary } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { decodeResponse } from "../snapshot-client/decode-in-turns.js";
import { snapshotOf } from "../testing/delta-fixture.js";
import { decodeCacheFile, encodeCacheFile } from "./cache-file.js";

/** Snapshot field 3 (routes), length-delimited. */
const ROUTES_TAG = (3 << 3) | 2;

describe("cache file of a snapshot decoded from the wire", () => {
  it("holds each resource's bytes as they arrived, not encoded again", async () => {
    const snapshot = snapshotOf(5, 2_000, 50);
    // One route with its fields in an order toBinary never writes (priority before name),
    // which protobuf decodes all the same: only bytes carried over can reproduce it.
    const odd = create(RouteSchema, { ...snapshot.routes[0]!, priority: 9 });
    const oddBytes = Buffer.concat([
      toBinary(RouteSchema, create(RouteSchema, { priority: 9 })),
      toBinary(RouteSchema, create(RouteSchema, { ...odd, priority: 0 })),
    ]);
    const rest = create(SnapshotSchema, { ...snapshot, routes: snapshot.routes.slice(1) });
    const snapshotBytes = Buffer.concat([
      Buffer.of(ROUTES_TAG, ...varint(oddBytes.length)),
      oddBytes,
      toBinary(SnapshotSchema, rest),
    ]);
    const message = Buffer.concat([
      Buffer.of(0x0a, ...varint(snapshotBytes.length)),
      snapshotBytes,
    ]);
    const response = await decodeResponse(message);
    if (response.message.case !== "snapshot") throw new Error("a snapshot");
    const decoded = response.message.value;
    expect(decoded.routes[0]).toEqual(odd);

    const file = encodeCacheFile(decoded);
    expect(file.includes(oddBytes)).toBe(true);
    expect(Buffer.from(toBinary(RouteSchema, decoded.routes[0]!)).equals(oddBytes)).toBe(false);
    const read = decodeCacheFile(file);
    expect(read.ok && read.snapshot).toEqual(decoded);
  });
});

function varint(value: number): number[] {
  const bytes: number[] = [];
  while (value >= 0x80) {
    bytes.push((value % 128) | 0x80);
    value = Math.floor(value / 128);
  }
  bytes.push(value);
  return bytes;
}
