import { createHash } from "node:crypto";
import { fromBinary, type Snapshot, SnapshotSchema, toBinary } from "@clawgate/proto";

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
  const payload = toBinary(SnapshotSchema, snapshot);
  const header = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(header, 0);
  header.writeUInt32BE(FORMAT, 8);
  header.writeBigUInt64BE(snapshot.version, 12);
  header.writeUInt32BE(payload.length, 20);
  sha256(payload).copy(header, 24);
  return Buffer.concat([header, payload]);
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
