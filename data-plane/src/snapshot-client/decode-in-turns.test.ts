import {
  create,
  fromBinary,
  StreamSnapshotsResponseSchema,
  TenantSchema,
  toBinary,
} from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { deltaOf, routeAt, snapshotOf } from "../testing/delta-fixture.js";
import { DECODE_AT_ONCE_BYTES, decodeResponse } from "./decode-in-turns.js";

function snapshotBytes(routes: number, upstreams: number): Uint8Array {
  const snapshot = snapshotOf(9, routes, upstreams);
  snapshot.nonce = "n9";
  snapshot.part = 1;
  snapshot.parts = 3;
  snapshot.tenants.push(create(TenantSchema, { name: "acme", requestsPerMinute: 5 }));
  return toBinary(
    StreamSnapshotsResponseSchema,
    create(StreamSnapshotsResponseSchema, { message: { case: "snapshot", value: snapshot } }),
  );
}

describe("decodeResponse", () => {
  it("decodes a whole config across event-loop turns to what fromBinary gives", async () => {
    const bytes = snapshotBytes(2_000, 200);
    expect(bytes.length).toBeGreaterThan(DECODE_AT_ONCE_BYTES);
    let turns = 0;
    let decoding = true;
    const ticker = (): void => {
      if (!decoding) return;
      turns += 1;
      setImmediate(ticker);
    };
    setImmediate(ticker);
    // A clock that moves a whole turn per step: every resource decoded ends a turn.
    let clock = 0;
    const decoded = await decodeResponse(bytes, { now: () => (clock += 10) });
    decoding = false;
    expect(turns).toBeGreaterThan(1_000);
    expect(decoded).toEqual(fromBinary(StreamSnapshotsResponseSchema, bytes));
  });

  it("decodes a small message or a delta at once", async () => {
    const delta = toBinary(
      StreamSnapshotsResponseSchema,
      create(StreamSnapshotsResponseSchema, {
        message: { case: "delta", value: deltaOf(3, { routes: [routeAt(1, 2)] }) },
      }),
    );
    expect(await decodeResponse(delta)).toEqual(fromBinary(StreamSnapshotsResponseSchema, delta));
    const small = snapshotBytes(3, 1);
    expect(await decodeResponse(small)).toEqual(fromBinary(StreamSnapshotsResponseSchema, small));
  });

  it("refuses bytes cut short", async () => {
    const bytes = snapshotBytes(2_000, 200);
    await expect(decodeResponse(bytes.subarray(0, bytes.length - 3))).rejects.toThrow();
  });
});
