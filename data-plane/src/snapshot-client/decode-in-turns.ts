import {
  BreakerPolicySchema,
  create,
  fromBinary,
  RouteSchema,
  type Snapshot,
  SnapshotSchema,
  type StreamSnapshotsResponse,
  StreamSnapshotsResponseSchema,
  TenantSchema,
  UpstreamSchema,
} from "@clawgate/proto";
import { type RunInTurnsOptions, runInTurns } from "../turns/run-in-turns.js";
import { resourceBytes } from "./resource-bytes.js";

/**
 * Messages up to this size decode at once; a bigger one (a whole config: 860 KB at 10,000
 * routes and 20,000 nodes, whose decode blocked the proxy's clients for hundreds of ms in
 * grpc-js's deserializer) decodes a resource per step across event-loop turns.
 */
export const DECODE_AT_ONCE_BYTES = 64 * 1024;

/** Fields read from the message between two points where the decode lets the loop run. */
const SCAN_STEP_FIELDS = 500;

/** StreamSnapshotsResponse field 1 (snapshot), length-delimited. */
const SNAPSHOT_TAG = (1 << 3) | 2;

/** Snapshot fields 3-6, the resources, each element decoded on its own. */
const RESOURCE_FIELDS = {
  3: ["routes", RouteSchema],
  4: ["upstreams", UpstreamSchema],
  5: ["breakers", BreakerPolicySchema],
  6: ["tenants", TenantSchema],
} as const;

/**
 * Decodes a StreamSnapshotsResponse to what `fromBinary` gives, across event-loop turns when it
 * is big. Throws (rejects) on bytes that are not one, as `fromBinary` does.
 */
export async function decodeResponse(
  bytes: Uint8Array,
  options: Omit<RunInTurnsOptions, "superseded"> = {},
): Promise<StreamSnapshotsResponse> {
  const snapshot = bytes.length > DECODE_AT_ONCE_BYTES ? onlySnapshot(bytes) : undefined;
  if (snapshot === undefined) return fromBinary(StreamSnapshotsResponseSchema, bytes);
  const value = await runInTurns(decodeSnapshotSteps(snapshot), options);
  return create(StreamSnapshotsResponseSchema, { message: { case: "snapshot", value: value! } });
}

/** The Snapshot's bytes when the response holds a snapshot and nothing else; else undefined. */
function onlySnapshot(bytes: Uint8Array): Uint8Array | undefined {
  const reader = new WireReader(bytes);
  if (reader.done() || reader.varint() !== SNAPSHOT_TAG) return undefined;
  const snapshot = reader.lengthDelimited();
  return reader.done() ? snapshot : undefined;
}

/**
 * The snapshot's own fields (version, nonce, parts, ...) decode at once from their bytes put
 * together; each resource is then a step, and the scan that finds them yields too (12,000
 * resources were one turn of it). Elements keep their order, so the result equals
 * `fromBinary`'s. Each resource's bytes are kept (resourceBytes) for the disk cache.
 */
function* decodeSnapshotSteps(bytes: Uint8Array): Generator<void, Snapshot> {
  const reader = new WireReader(bytes);
  const scalars: Uint8Array[] = [];
  const resources: [field: number, start: number, content: number, end: number][] = [];
  while (!reader.done()) {
    const start = reader.at;
    const tag = reader.varint();
    const field = Math.floor(tag / 8);
    reader.skip(tag % 8);
    if (tag % 8 === 2 && field in RESOURCE_FIELDS) {
      resources.push([field, start, reader.contentAt, reader.at]);
      if (resources.length % SCAN_STEP_FIELDS === 0) yield;
      continue;
    }
    scalars.push(bytes.subarray(start, reader.at));
  }
  yield;
  const snapshot = fromBinary(SnapshotSchema, Buffer.concat(scalars));
  for (const [field, start, content, end] of resources) {
    const [kind, schema] = RESOURCE_FIELDS[field as keyof typeof RESOURCE_FIELDS];
    // biome-ignore lint/suspicious/noExplicitAny: each field number pairs a kind with its schema.
    const resource = fromBinary(schema as any, bytes.subarray(content, end));
    (snapshot[kind] as object[]).push(resource);
    resourceBytes.set(resource, bytes.subarray(start, end));
    yield;
  }
  return snapshot;
}

/** Just enough of the protobuf wire format to find fields and their bytes. */
class WireReader {
  at = 0;
  /** Where the content of the last length-delimited field read starts. */
  contentAt = 0;
  constructor(private readonly bytes: Uint8Array) {}

  done(): boolean {
    return this.at >= this.bytes.length;
  }

  varint(): number {
    let value = 0;
    let scale = 1;
    for (;;) {
      if (this.at >= this.bytes.length) throw new Error("premature end of a varint");
      const byte = this.bytes[this.at++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
      if (scale > 2 ** 70) throw new Error("varint over 10 bytes");
    }
  }

  lengthDelimited(): Uint8Array {
    const length = this.varint();
    this.contentAt = this.at;
    const end = this.at + length;
    if (end > this.bytes.length) throw new Error("length-delimited field runs past the end");
    const slice = this.bytes.subarray(this.at, end);
    this.at = end;
    return slice;
  }

  skip(wireType: number): void {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.advance(8);
    else if (wireType === 2) this.lengthDelimited();
    else if (wireType === 5) this.advance(4);
    else throw new Error(`unsupported wire type ${wireType}`);
  }

  private advance(count: number): void {
    if (this.at + count > this.bytes.length) throw new Error("fixed-size field runs past the end");
    this.at += count;
  }
}
