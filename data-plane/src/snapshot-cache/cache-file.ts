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
  const steps = cacheFileSteps(snapshot);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/**
 * `encodeCacheFile` across event-loop turns, to the same bytes. The first write after boot
 * encodes every resource of the config (20,000 nodes, 10,000 routes), which blocked the proxy's
 * clients for 400 ms in one turn. Later writes reuse each resource's bytes, but still walk
 * 12,000 resources, copy and checksum the whole file: run in one turn, that was 20-60 ms of
 * CPU every 2 s while changes arrived, and with ten data planes saving the same change at the
 * same moment on two cores, the turn that an idle or change window met lasted 100-400 ms
 * (issue 9). Every step here is small, cached or not.
 */
export async function encodeCacheFileInTurns(
  snapshot: Snapshot,
  options: Omit<RunInTurnsOptions, "superseded"> = {},
): Promise<Buffer> {
  return (await runInTurns(cacheFileSteps(snapshot), options))!;
}

/** Snapshot fields 3-6 (routes, upstreams, breakers, tenants), length-delimited. */
const RESOURCE_FIELDS = [
  ["routes", (SNAPSHOT_RESOURCE_FIELDS.routes << 3) | 2, RouteSchema],
  ["upstreams", (SNAPSHOT_RESOURCE_FIELDS.upstreams << 3) | 2, UpstreamSchema],
  ["breakers", (SNAPSHOT_RESOURCE_FIELDS.breakers << 3) | 2, BreakerPolicySchema],
  ["tenants", (SNAPSHOT_RESOURCE_FIELDS.tenants << 3) | 2, TenantSchema],
] as const;

/** Bytes checksummed per step: SHA-256 of 64 KiB takes well under a millisecond. */
const HASH_STEP_BYTES = 64 * 1024;

/**
 * The snapshot as binary protobuf (without the file's header): the scalar fields, then every
 * resource. Field order differs from toBinary's, which protobuf allows; it decodes the same.
 */
export function encodeSnapshot(snapshot: Snapshot): Buffer {
  return encodeCacheFile(snapshot).subarray(HEADER_BYTES);
}

/**
 * The cache file cut into small steps (see runInTurns). A resource's field comes from
 * resourceBytes: the bytes it arrived as, or its encoding from an earlier write (a snapshot
 * built from a delta shares every resource it did not change with the one before, so a write
 * encodes only what changed); the others are encoded here. One step per resource taken, one per
 * resource copied into the file, one per 64 KiB checksummed. The payload is copied once, into
 * the file itself, behind room left for the header.
 */
function* cacheFileSteps(snapshot: Snapshot): Generator<void, Buffer> {
  const head = toBinary(
    SnapshotSchema,
    create(SnapshotSchema, {
      version: snapshot.version,
      nonce: snapshot.nonce,
      createdAtMs: snapshot.createdAtMs,
    }),
  );
  const pieces: Uint8Array[] = [head];
  let length = head.length;
  for (const [kind, tag, schema] of RESOURCE_FIELDS) {
    for (const resource of snapshot[kind]) {
      let framed = resourceBytes.get(resource);
      if (framed === undefined) {
        // biome-ignore lint/suspicious/noExplicitAny: the schema and resource kinds pair up above.
        framed = lengthDelimited(tag, toBinary(schema as any, resource));
        resourceBytes.set(resource, framed);
      }
      pieces.push(framed);
      length += framed.length;
      yield;
    }
  }
  const file = Buffer.allocUnsafe(HEADER_BYTES + length);
  let at = HEADER_BYTES;
  for (const piece of pieces) {
    file.set(piece, at);
    at += piece.length;
    yield;
  }
  const payload = file.subarray(HEADER_BYTES);
  const hash = createHash("sha256");
  for (let from = 0; from < length; from += HASH_STEP_BYTES) {
    hash.update(payload.subarray(from, from + HASH_STEP_BYTES));
    yield;
  }
  MAGIC.copy(file, 0);
  file.writeUInt32BE(FORMAT, 8);
  file.writeBigUInt64BE(snapshot.version, 12);
  file.writeUInt32BE(length, 20);
  hash.digest().copy(file, 24);
  return file;
}

/** One length-delimited field: its tag, the length as a varint, the bytes. */
function lengthDelimited(tag: number, bytes: Uint8Array): Uint8Array {
  let size = 1;
  for (let value = bytes.length; value >= 0x80; value = Math.floor(value / 128)) size += 1;
  const out = new Uint8Array(1 + size + bytes.length);
  out[0] = tag;
  let at = 1;
  let value = bytes.length;
  while (value >= 0x80) {
    out[at++] = (value % 128) | 0x80;
    value = Math.floor(value / 128);
  }
  out[at++] = value;
  out.set(bytes, at);
  return out;
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
