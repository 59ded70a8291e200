import {
  BinaryWriter,
  BreakerPolicySchema,
  create,
  encodeResponse,
  RouteSchema,
  type Snapshot,
  SnapshotSchema,
  StreamSnapshotsResponseSchema,
  TenantSchema,
  toBinary,
  UpstreamSchema,
  WireType,
} from "@clawgate/proto";
import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";

/**
 * Target size of one message on a snapshot stream. A snapshot bigger than this travels in parts,
 * so no message nears a gRPC limit (4 MiB by default on either side), a data plane decodes a
 * slice at a time, and a stream's transport buffer holds a part, not the whole config. 1 MiB is
 * a few thousand routes: a one-route delta or a small config still goes as one message.
 */
export const SNAPSHOT_PART_BYTES = 1024 * 1024;

/**
 * Room for a part's own fields (version, nonce, createdAtMs, part, parts, the response's
 * framing) on top of its resources; the nonce is bounded by STREAM_LIMITS.nonceLength (256).
 */
const PART_HEADER_BYTES = 512;

/** Bytes a repeated message field adds around one element: its tag and a length of up to 5. */
const ELEMENT_FRAMING_BYTES = 6;

/** How a snapshot went to a data plane: whole (in however many messages) or as a delta. */
export type EncodingKind = "full" | "delta";

export interface SnapshotEncodingsOptions {
  /** Target size of one message; default SNAPSHOT_PART_BYTES. */
  partBytes?: number;
  /** Told about every encode, once per version and kind (tests count them). */
  onEncode?(kind: EncodingKind | "whole", version: number, bytes: number): void;
}

/** One version's bytes, each encoded on first use. */
interface Entry {
  nonce: string;
  full: readonly Uint8Array[] | undefined;
  whole: Uint8Array | undefined;
  /** null: the delta is not worth sending (or there is none). */
  delta: Uint8Array | null | undefined;
}

/** Field numbers of Snapshot and StreamSnapshotsResponse, read from the generated schema. */
const FIELD = {
  version: fieldNumber(SnapshotSchema, "version"),
  nonce: fieldNumber(SnapshotSchema, "nonce"),
  routes: fieldNumber(SnapshotSchema, "routes"),
  upstreams: fieldNumber(SnapshotSchema, "upstreams"),
  breakers: fieldNumber(SnapshotSchema, "breakers"),
  tenants: fieldNumber(SnapshotSchema, "tenants"),
  createdAtMs: fieldNumber(SnapshotSchema, "createdAtMs"),
  part: fieldNumber(SnapshotSchema, "part"),
  parts: fieldNumber(SnapshotSchema, "parts"),
  responseSnapshot: fieldNumber(StreamSnapshotsResponseSchema, "snapshot"),
};

/** One resource already encoded, with the field of Snapshot it belongs to. */
interface EncodedResource {
  fieldNo: number;
  bytes: Uint8Array;
}

/**
 * The bytes every stream writes for a published snapshot: the whole snapshot (in parts when it
 * is big) and the delta, each encoded once per version and shared by all streams, so a publish
 * costs the same however many data planes are connected. Only the two newest versions are kept:
 * a stream only ever sends the newest, and the one before may still be going out.
 */
export class SnapshotEncodings {
  private readonly partBytes: number;
  private readonly onEncode: SnapshotEncodingsOptions["onEncode"];
  private readonly entries = new Map<number, Entry>();

  constructor(options: SnapshotEncodingsOptions = {}) {
    this.partBytes = options.partBytes ?? SNAPSHOT_PART_BYTES;
    this.onEncode = options.onEncode;
  }

  /**
   * The whole snapshot as StreamSnapshotsResponse messages: one with part and parts unset when it
   * fits in partBytes (the same bytes as before parts existed), else parts 0..n-1.
   */
  full(published: PublishedSnapshot): readonly Uint8Array[] {
    const entry = this.entry(published);
    if (entry.full === undefined) {
      entry.full = encodeParts(published.snapshot, this.partBytes);
      this.onEncode?.("full", published.version, totalBytes(entry.full));
    }
    return entry.full;
  }

  /**
   * The whole snapshot as one message, for a data plane older than parts (one that does not say
   * Hello.acceptsDeltas, which came with them): it would take part 0 for the whole config. The
   * same bytes as full() when that is one message; a bigger one is encoded apart, and only
   * when such a data plane asks.
   */
  whole(published: PublishedSnapshot): Uint8Array {
    const full = this.full(published);
    if (full.length === 1) return full[0] as Uint8Array;
    const entry = this.entry(published);
    if (entry.whole === undefined) {
      entry.whole = encodeResponse(
        create(StreamSnapshotsResponseSchema, {
          message: { case: "snapshot", value: published.snapshot },
        }),
      );
      this.onEncode?.("whole", published.version, entry.whole.byteLength);
    }
    return entry.whole;
  }

  /**
   * The delta as one StreamSnapshotsResponse, or undefined when there is none or it is not worth
   * sending: over partBytes (a change that big may as well go whole, in parts) or no smaller than
   * the whole snapshot.
   */
  delta(published: PublishedSnapshot): Uint8Array | undefined {
    const entry = this.entry(published);
    if (entry.delta === undefined) entry.delta = this.encodeDelta(published, entry);
    return entry.delta ?? undefined;
  }

  private encodeDelta(published: PublishedSnapshot, entry: Entry): Uint8Array | null {
    const delta = published.delta;
    if (delta === undefined) return null;
    const bytes = encodeResponse(
      create(StreamSnapshotsResponseSchema, { message: { case: "delta", value: delta } }),
    );
    this.onEncode?.("delta", published.version, bytes.byteLength);
    if (bytes.byteLength > this.partBytes) return null;
    // Comparing with the whole snapshot costs at most the delta's size in encoding work (a
    // whole snapshot bigger than the delta is found out after that many bytes), so a one-route
    // change stays cheap at any config size.
    const full = entry.full;
    const wholeIsSmaller =
      full !== undefined
        ? totalBytes(full) <= bytes.byteLength
        : resourcesFitIn(published.snapshot, bytes.byteLength);
    return wholeIsSmaller ? null : bytes;
  }

  private entry(published: PublishedSnapshot): Entry {
    const known = this.entries.get(published.version);
    // A version re-published with another nonce (another build of the same revision) is new.
    if (known !== undefined && known.nonce === published.nonce) return known;
    const entry: Entry = {
      nonce: published.nonce,
      full: undefined,
      whole: undefined,
      delta: undefined,
    };
    this.entries.set(published.version, entry);
    this.keepNewest(2);
    return entry;
  }

  private keepNewest(count: number): void {
    if (this.entries.size <= count) return;
    const keep = new Set([...this.entries.keys()].sort((a, b) => b - a).slice(0, count));
    for (const version of this.entries.keys()) {
      if (!keep.has(version)) this.entries.delete(version);
    }
  }
}

/**
 * Encodes each resource once, then lays them into as few messages of at most `partBytes` as
 * their order allows (one resource bigger than that gets a part of its own). A snapshot that
 * fits in one message is encoded whole, with part and parts unset, byte for byte as toBinary
 * writes it, so a data plane that knows nothing of parts reads it as before.
 */
function encodeParts(snapshot: Snapshot, partBytes: number): Uint8Array[] {
  const resources = [...encodedResources(snapshot)];
  let size = 0;
  for (const resource of resources) size += resource.bytes.byteLength + ELEMENT_FRAMING_BYTES;
  const budget = Math.max(1, partBytes - PART_HEADER_BYTES);
  if (size <= budget) return [writePart(snapshot, resources, 0, 0)];

  const slices: EncodedResource[][] = [];
  let slice: EncodedResource[] = [];
  let sliceBytes = 0;
  for (const resource of resources) {
    const cost = resource.bytes.byteLength + ELEMENT_FRAMING_BYTES;
    if (slice.length > 0 && sliceBytes + cost > budget) {
      slices.push(slice);
      slice = [];
      sliceBytes = 0;
    }
    slice.push(resource);
    sliceBytes += cost;
  }
  slices.push(slice);
  return slices.map((resourcesOfPart, part) =>
    writePart(snapshot, resourcesOfPart, part, slices.length),
  );
}

/**
 * One StreamSnapshotsResponse{snapshot} from resources already encoded, fields in number order
 * and zero scalars left out, as toBinary would write the same message.
 */
function writePart(
  snapshot: Snapshot,
  resources: readonly EncodedResource[],
  part: number,
  parts: number,
): Uint8Array {
  const body = new BinaryWriter();
  if (snapshot.version !== 0n) body.tag(FIELD.version, WireType.Varint).uint64(snapshot.version);
  if (snapshot.nonce !== "") body.tag(FIELD.nonce, WireType.LengthDelimited).string(snapshot.nonce);
  // Resources are in field-number order already: routes, upstreams, breakers, tenants.
  for (const { fieldNo, bytes } of resources) {
    body.tag(fieldNo, WireType.LengthDelimited).bytes(bytes);
  }
  if (snapshot.createdAtMs !== 0n) {
    body.tag(FIELD.createdAtMs, WireType.Varint).uint64(snapshot.createdAtMs);
  }
  if (part !== 0) body.tag(FIELD.part, WireType.Varint).uint32(part);
  if (parts !== 0) body.tag(FIELD.parts, WireType.Varint).uint32(parts);
  const message = new BinaryWriter();
  message.tag(FIELD.responseSnapshot, WireType.LengthDelimited).bytes(body.finish());
  return message.finish();
}

/** Each resource of the snapshot encoded alone, in field-number order (as toBinary writes them). */
function* encodedResources(snapshot: Snapshot): Generator<EncodedResource> {
  for (const route of snapshot.routes) {
    yield { fieldNo: FIELD.routes, bytes: toBinary(RouteSchema, route) };
  }
  for (const upstream of snapshot.upstreams) {
    yield { fieldNo: FIELD.upstreams, bytes: toBinary(UpstreamSchema, upstream) };
  }
  for (const breaker of snapshot.breakers) {
    yield { fieldNo: FIELD.breakers, bytes: toBinary(BreakerPolicySchema, breaker) };
  }
  for (const tenant of snapshot.tenants) {
    yield { fieldNo: FIELD.tenants, bytes: toBinary(TenantSchema, tenant) };
  }
}

/** Whether the snapshot's resources encode to at most `limit` bytes; stops once past it. */
function resourcesFitIn(snapshot: Snapshot, limit: number): boolean {
  let size = 0;
  for (const resource of encodedResources(snapshot)) {
    size += resource.bytes.byteLength + ELEMENT_FRAMING_BYTES;
    if (size > limit) return false;
  }
  return true;
}

function totalBytes(messages: readonly Uint8Array[]): number {
  let total = 0;
  for (const message of messages) total += message.byteLength;
  return total;
}

function fieldNumber(
  schema: { typeName: string; field: Record<string, { number: number }> },
  localName: string,
): number {
  const field = schema.field[localName];
  if (field === undefined) throw new Error(`${schema.typeName} has no field ${localName}`);
  return field.number;
}
