import {
  create,
  encodeResponse,
  fromBinary,
  type Snapshot,
  SnapshotSchema,
  StreamSnapshotsResponseSchema,
} from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { FakeSnapshotPublisher } from "../testing/fake-snapshot-publisher.js";
import { type EncodingKind, SnapshotEncodings } from "./snapshot-encodings.js";

function decodeSnapshot(bytes: Uint8Array): Snapshot {
  const response = fromBinary(StreamSnapshotsResponseSchema, bytes);
  if (response.message.case !== "snapshot") throw new Error(`got ${response.message.case}`);
  return response.message.value;
}

/** The snapshot a data plane gets by putting the parts' resources back together in order. */
function reassemble(parts: readonly Uint8Array[]): Snapshot {
  const decoded = parts.map(decodeSnapshot);
  const first = decoded[0]!;
  return create(SnapshotSchema, {
    version: first.version,
    nonce: first.nonce,
    createdAtMs: first.createdAtMs,
    routes: decoded.flatMap((part) => part.routes),
    upstreams: decoded.flatMap((part) => part.upstreams),
    breakers: decoded.flatMap((part) => part.breakers),
    tenants: decoded.flatMap((part) => part.tenants),
  });
}

function counting(partBytes?: number) {
  const encodes: Array<{ kind: EncodingKind | "whole"; version: number }> = [];
  const encodings = new SnapshotEncodings({
    partBytes,
    onEncode: (kind, version) => encodes.push({ kind, version }),
  });
  return { encodings, encodes };
}

describe("snapshot encodings", () => {
  it("writes a snapshot that fits in one message byte for byte as before parts existed", () => {
    const publisher = new FakeSnapshotPublisher();
    const published = publisher.publish({ put: [{ name: "a", nodes: 3 }, { name: "b" }] });
    const { encodings } = counting();
    const full = encodings.full(published);
    expect(full).toHaveLength(1);
    const before = encodeResponse(
      create(StreamSnapshotsResponseSchema, {
        message: { case: "snapshot", value: published.snapshot },
      }),
    );
    expect(Buffer.from(full[0]!).equals(Buffer.from(before))).toBe(true);
    expect(decodeSnapshot(full[0]!).parts).toBe(0);
  });

  it("splits a big snapshot into numbered parts under the size that reassemble to it", () => {
    const publisher = new FakeSnapshotPublisher();
    const published = publisher.publish({
      put: Array.from({ length: 40 }, (_, i) => ({ name: `u${i}`, nodes: 50 })),
    });
    const partBytes = 16 * 1024;
    const { encodings } = counting(partBytes);
    const parts = encodings.full(published);
    expect(parts.length).toBeGreaterThan(2);
    for (const [index, bytes] of parts.entries()) {
      expect(bytes.byteLength).toBeLessThanOrEqual(partBytes);
      const part = decodeSnapshot(bytes);
      expect(part).toMatchObject({ part: index, parts: parts.length, nonce: published.nonce });
      expect(part.version).toBe(BigInt(published.version));
      expect(part.createdAtMs).toBe(published.snapshot.createdAtMs);
    }
    expect(reassemble(parts)).toEqual(published.snapshot);
  });

  it("writes a big snapshot as one message too for data planes that know nothing of parts", () => {
    const publisher = new FakeSnapshotPublisher();
    const small = publisher.publish({ put: [{ name: "a" }] });
    const { encodings, encodes } = counting(16 * 1024);
    expect(encodings.whole(small)).toBe(encodings.full(small)[0]);

    const big = publisher.publish({
      put: Array.from({ length: 40 }, (_, i) => ({ name: `u${i}`, nodes: 50 })),
    });
    const whole = encodings.whole(big);
    expect(encodings.whole(big)).toBe(whole);
    const decoded = decodeSnapshot(whole);
    expect(decoded.parts).toBe(0);
    expect(decoded).toEqual(big.snapshot);
    expect(encodes.filter((e) => e.version === big.version).map((e) => e.kind)).toEqual([
      "full",
      "whole",
    ]);
  });

  it("encodes each version once, whole and as a delta, however often it is asked", () => {
    const publisher = new FakeSnapshotPublisher();
    publisher.publish({ put: Array.from({ length: 20 }, (_, i) => ({ name: `u${i}`, nodes: 5 })) });
    const published = publisher.publish({ put: [{ name: "u3", nodes: 6 }] });
    const { encodings, encodes } = counting();
    const full = encodings.full(published);
    const delta = encodings.delta(published);
    for (let i = 0; i < 10; i++) {
      expect(encodings.full(published)).toBe(full);
      expect(encodings.delta(published)).toBe(delta);
    }
    expect(encodes).toEqual([
      { kind: "full", version: published.version },
      { kind: "delta", version: published.version },
    ]);
    const decoded = fromBinary(StreamSnapshotsResponseSchema, delta!);
    expect(decoded.message.case).toBe("delta");
    expect(decoded.message.value).toEqual(published.delta);
  });

  it("sends no delta that is bigger than the whole snapshot or than a part", () => {
    const publisher = new FakeSnapshotPublisher();
    publisher.publish({ put: [{ name: "big", nodes: 10 }, { name: "small" }] });
    // Removing many names costs more than the one small upstream left.
    const removals = Array.from({ length: 200 }, (_, i) => `gone-${i}`);
    const shrunk = publisher.publish({ remove: ["big", ...removals] });
    expect(counting().encodings.delta(shrunk)).toBeUndefined();

    const grown = publisher.publish({ put: [{ name: "huge", nodes: 2_000 }] });
    expect(counting(16 * 1024).encodings.delta(grown)).toBeUndefined();
    // The same delta under a part's size goes.
    expect(counting().encodings.delta(grown)).toBeInstanceOf(Uint8Array);
  });

  it("has no delta for a publish without one", () => {
    const publisher = new FakeSnapshotPublisher();
    publisher.publish({ put: [{ name: "a" }] });
    const relisted = publisher.publish({ put: [{ name: "b" }], withoutDelta: true });
    expect(counting().encodings.delta(relisted)).toBeUndefined();
  });

  it("keeps the bytes of the two newest versions only", () => {
    const publisher = new FakeSnapshotPublisher();
    const first = publisher.publish({ put: [{ name: "a" }] });
    const second = publisher.publish({ put: [{ name: "b" }] });
    const third = publisher.publish({ put: [{ name: "c" }] });
    const { encodings, encodes } = counting();
    const firstBytes = encodings.full(first);
    const secondBytes = encodings.full(second);
    encodings.full(third);
    // The newest two are still shared...
    expect(encodings.full(second)).toBe(secondBytes);
    expect(encodes.filter((e) => e.version === third.version)).toHaveLength(1);
    // ...the oldest was let go, so asking again encodes it again.
    expect(encodings.full(first)).not.toBe(firstBytes);
    expect(encodes.filter((e) => e.version === first.version)).toHaveLength(2);
  });
});
