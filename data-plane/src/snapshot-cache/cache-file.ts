import { createHash } from "node:crypto";
import {
  BreakerPolicySchema,
  create,
  fromBinary,
  RouteSchema,
  type Snapshot,
  SnapshotSchema,
  TenantSchema,
  toBinary,
  UpstreamSchema,
} from "@clawgate/proto";
import { resourceBytes, SNAPSHOT_RESOURCE_FIELDS } from "../snapshot-client/resource-bytes.js";
import { type RunInTurnsOptions, runInTurns } from "../turns/run-in-turns.js";

/**
 * Layout of the cache file, all integers big-endian:
 *   0  "CLAWSNAP"  magic, so a stray file is never mistaken for a snapshot
 *   8  u32         format (1)
 *  12  u64         snapshot version, readable without decoding the payload
 *  20  u32         payload length
 *  24  32 bytes    SHA-256 of the payload
 *  56  payload     the Snapshot as binary protobuf, exactly as the control plane sent it
 */
const MAGIC = Buffer.from("CLAWSNAP", "ascii");
const FORMAT = 1;
const HEADER_BYTES = 56;

export type DecodeResult =
  | { ok: true; snapshot: Snapshot; version: number }
  | { ok: false; reason: string };

/** The snapshot framed with its version and checksum, ready to be written. */
export function encodeCacheFile(snapshot: Snapshot): Buffer {
  return frame(snapshot.version, encodeSnapshot(snapshot));
}

/**
 * `encodeCacheFile` across event-loop turns: the first write after boot encodes every resource
 * of the config (20,000 nodes, 10,000 routes), which blocked the proxy's clients for 400 ms in
 * one turn; the bytes are the same.
 */
export async function encodeCacheFileInTurns(
  snapshot: Snapshot,
  options: Omit<RunInTurnsOptions, "superseded"> = {},
): Promise<Buffer> {
  const payload = await runInTurns(encodeSnapshotSteps(snapshot), options);
  return frame(snapshot.version, payload!);
}

function frame(version: bigint, payload: Buffer): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(header, 0);
  header.writeUInt32BE(FORMAT, 8);
  header.writeBigUInt64BE(version, 12);
  header.writeUInt32BE(payload.length, 20);
  sha256(payload).copy(header, 24);
  return Buffer.concat([header, payload]);
}

/** Snapshot fields 3-6 (routes, upstreams, breakers, tenants), length-delimited. */
const RESOURCE_FIELDS = [
  ["routes", (SNAPSHOT_RESOURCE_FIELDS.routes << 3) | 2, RouteSchema],
  ["upstreams", (SNAPSHOT_RESOURCE_FIELDS.upstreams << 3) | 2, UpstreamSchema],
  ["breakers", (SNAPSHOT_RESOURCE_FIELDS.breakers << 3) | 2, BreakerPolicySchema],
  ["tenants", (SNAPSHOT_RESOURCE_FIELDS.tenants << 3) | 2, TenantSchema],
] as const;

/** Resources framed between two points where the encode lets the event loop run. */
const STEP_RESOURCES = 200;

/**
 * The snapshot as binary protobuf: the scalar fields, then every resource. Field order differs
 * from toBinary's, which protobuf allows; it decodes the same.
 */
export function encodeSnapshot(snapshot: Snapshot): Buffer {
  const steps = encodeSnapshotSteps(snapshot);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/**
 * encodeSnapshot cut into steps (see runInTurns). A resource's field comes from resourceBytes:
 * the bytes it arrived as, or its encoding from an earlier write (a snapshot built from a delta
 * shares every resource it did not change with the one before, so a write encodes only what
 * changed); the others are encoded here, a step each.
 */
function* encodeSnapshotSteps(snapshot: Snapshot): Generator<void, Buffer> {
  const head = toBinary(
    SnapshotSchema,
    create(SnapshotSchema, {
      version: snapshot.version,
      nonce: snapshot.nonce,
      createdAtMs: snapshot.createdAtMs,
    }),
  );
  const chunks: Uint8Array[] = [head];
  let count = 0;
  for (const [kind, tag, schema] of RESOURCE_FIELDS) {
    for (const resource of snapshot[kind]) {
      let field = resourceBytes.get(resource);
      if (field === undefined) {
        // biome-ignore lint/suspicious/noExplicitAny: the schema and resource kinds pair up above.
        const bytes = toBinary(schema as any, resource);
        field = Buffer.concat([Uint8Array.of(tag), varint(bytes.length), bytes]);
        resourceBytes.set(resource, field);
        yield;
      } else if (++count % STEP_RESOURCES === 0) {
        yield;
      }
      chunks.push(field);
    }
  }
  return Buffer.concat(chunks);
}

function varint(value: number): Uint8Array {
  const bytes: number[] = [];
  while (value >= 0x80) {
    bytes.push((value % 128) | 0x80);
    value = Math.floor(value / 128);
  }
  bytes.push(value);
  return Uint8Array.from(bytes);
}

/** Checks the frame and decodes the snapshot; a damaged file is a reason, never a throw. */
export function decodeCacheFile(file: Buffer): DecodeResult {
  if (file.length < HEADER_BYTES) {
    return { ok: false, reason: `file is ${file.length} bytes, shorter than the header` };
  }
  if (!file.subarray(0, 8).equals(MAGIC)) return { ok: false, reason: "not a snapshot cache file" };
  const format = file.readUInt32BE(8);
  if (format !== FORMAT) return { ok: false, reason: `unknown cache format ${format}` };
  const version = file.readBigUInt64BE(12);
  const length = file.readUInt32BE(20);
  const payload = file.subarray(HEADER_BYTES);
  if (payload.length !== length) {
    return { ok: false, reason: `payload is ${payload.length} bytes, header says ${length}` };
  }
  if (!sha256(payload).equals(file.subarray(24, HEADER_BYTES))) {
    return { ok: false, reason: "checksum mismatch" };
  }
  let snapshot: Snapshot;
  try {
    snapshot = fromBinary(SnapshotSchema, payload);
  } catch (err) {
    return { ok: false, reason: `payload does not decode: ${(err as Error).message}` };
  }
  if (snapshot.version !== version) {
    return {
      ok: false,
      reason: `header version ${version} != snapshot version ${snapshot.version}`,
    };
  }
  return { ok: true, snapshot, version: Number(version) };
}

function sha256(data: Uint8Array): Buffer {
  return createHash("sha256").update(data).digest();
}
