import { createHash } from "node:crypto";
import { fromBinary, type SnapshotDelta, SnapshotDeltaSchema, toBinary } from "@clawgate/proto";

/**
 * The deltas applied since the whole snapshot in the cache file, appended one record per write
 * so a one-route change costs its own bytes on disk, not a rewrite of the whole config.
 * Integers big-endian:
 *   file:   "CLAWDLOG" (8) | u32 format (1) | records...
 *   record: u32 payload length | 32 bytes SHA-256 of the payload | payload
 *   payload: the SnapshotDelta as binary protobuf, as the control plane sent it
 * An append can be cut short by a crash: a record whose length runs past the end of the file,
 * or whose checksum does not match, ends the log there, and it and everything after it are
 * ignored, never served. So is a record that does not apply on the version reached before it
 * (its baseVersion), which is how a log left behind by an older cache file is told apart.
 */
const MAGIC = Buffer.from("CLAWDLOG", "ascii");
const FORMAT = 1;
export const DELTA_LOG_HEADER_BYTES = 12;
const RECORD_HEAD_BYTES = 36;

/** The log's first bytes, written when it is created. */
export function deltaLogHeader(): Buffer {
  const header = Buffer.alloc(DELTA_LOG_HEADER_BYTES);
  MAGIC.copy(header, 0);
  header.writeUInt32BE(FORMAT, 8);
  return header;
}

/** Deltas framed as records, ready to be appended. */
export function encodeDeltaRecords(deltas: readonly SnapshotDelta[]): Buffer {
  const records: Uint8Array[] = [];
  for (const delta of deltas) {
    const payload = toBinary(SnapshotDeltaSchema, delta);
    const head = Buffer.alloc(RECORD_HEAD_BYTES);
    head.writeUInt32BE(payload.length, 0);
    createHash("sha256").update(payload).digest().copy(head, 4);
    records.push(head, payload);
  }
  return Buffer.concat(records);
}

export interface DecodedDeltaLog {
  /** The deltas that follow `version` one after another, in order. */
  readonly deltas: SnapshotDelta[];
  /** Why reading stopped before the end of the file, when it did (a torn or stale tail). */
  readonly stopped: string | undefined;
}

/**
 * The deltas of the log that apply, one after the other, on the snapshot of `version`. A log
 * that is not one (no magic, unknown format) is a reason, never a throw.
 */
export function decodeDeltaLog(file: Buffer, version: bigint): DecodedDeltaLog {
  if (file.length < DELTA_LOG_HEADER_BYTES || !file.subarray(0, 8).equals(MAGIC)) {
    return { deltas: [], stopped: "not a delta log" };
  }
  const format = file.readUInt32BE(8);
  if (format !== FORMAT) return { deltas: [], stopped: `unknown delta log format ${format}` };
  const deltas: SnapshotDelta[] = [];
  let at = DELTA_LOG_HEADER_BYTES;
  let reached = version;
  while (at < file.length) {
    const stop = (reason: string) => ({ deltas, stopped: `${reason} at byte ${at}` });
    if (file.length - at < RECORD_HEAD_BYTES) return stop("torn record header");
    const length = file.readUInt32BE(at);
    const payload = file.subarray(at + RECORD_HEAD_BYTES, at + RECORD_HEAD_BYTES + length);
    if (payload.length !== length) return stop("torn record");
    const sum = createHash("sha256").update(payload).digest();
    if (!sum.equals(file.subarray(at + 4, at + RECORD_HEAD_BYTES)))
      return stop("checksum mismatch");
    let delta: SnapshotDelta;
    try {
      delta = fromBinary(SnapshotDeltaSchema, payload);
    } catch (err) {
      return stop(`record does not decode (${(err as Error).message})`);
    }
    if (delta.baseVersion !== reached) {
      return stop(`delta ${delta.version} is on ${delta.baseVersion}, not on ${reached}`);
    }
    deltas.push(delta);
    reached = delta.version;
    at += RECORD_HEAD_BYTES + length;
  }
  return { deltas, stopped: undefined };
}
