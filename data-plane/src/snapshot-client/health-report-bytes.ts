import { setImmediate as nextTurn } from "node:timers/promises";
import type { NodeHealth } from "@clawgate/proto";

/** StreamSnapshotsRequest field 4 (health) and NodeHealthReport field 1 (nodes), length-delimited. */
const HEALTH_FIELD = (4 << 3) | 2;
const NODES_FIELD = (1 << 3) | 2;
/** NodeHealthReport field 2 (changes_only, varint) set to true, and field 3 (removed). */
const CHANGES_ONLY = Uint8Array.of(2 << 3, 1);
const REMOVED_FIELD = (3 << 3) | 2;

/** A changes-only report's lists (NodeHealthReport with changes_only). */
export interface HealthChangesToEncode {
  readonly nodes: readonly NodeHealth[];
  readonly removed: readonly NodeHealth[];
}

/**
 * Nodes encoded per event-loop turn by `encodeInTurns`. A first report of 20,000 nodes took
 * 230-730 ms in one turn on a loaded 2-core machine (and 40-120 ms even with every node's bytes
 * cached, to copy them into one buffer); 1,000 at a time keeps each turn to a few ms.
 */
export const HEALTH_NODES_PER_TURN = 1_000;

/**
 * Encodes a StreamSnapshotsRequest carrying a health report, reusing each node's encoding while
 * its NodeHealth object is the same (HealthRegistry.snapshot keeps a node's object until its
 * state changes). Encoding 20,000 nodes from scratch blocked the event loop for hundreds of
 * milliseconds, once per second through a mass eviction; the bytes are the same protobuf.
 */
export class HealthReportEncoder {
  #cache = new WeakMap<NodeHealth, Uint8Array>();

  /** The whole report in one turn: for reports of up to `HEALTH_NODES_PER_TURN` nodes. */
  encode(nodes: readonly NodeHealth[]): Uint8Array {
    return withHeader([this.#entries(nodes, NODES_FIELD)]);
  }

  /** The same bytes as `encode`, `HEALTH_NODES_PER_TURN` nodes per event-loop turn. */
  async encodeInTurns(nodes: readonly NodeHealth[]): Promise<Uint8Array> {
    return withHeader(await this.#entriesInTurns(nodes, NODES_FIELD));
  }

  /** A changes-only report in one turn: for up to `HEALTH_NODES_PER_TURN` entries. */
  encodeChanges(changes: HealthChangesToEncode): Uint8Array {
    return withHeader([
      this.#entries(changes.nodes, NODES_FIELD),
      CHANGES_ONLY,
      this.#entries(changes.removed, REMOVED_FIELD),
    ]);
  }

  /** The same bytes as `encodeChanges`, `HEALTH_NODES_PER_TURN` entries per event-loop turn. */
  async encodeChangesInTurns(changes: HealthChangesToEncode): Promise<Uint8Array> {
    const nodes = await this.#entriesInTurns(changes.nodes, NODES_FIELD);
    if (changes.nodes.length > 0) await nextTurn();
    const removed = await this.#entriesInTurns(changes.removed, REMOVED_FIELD);
    return withHeader([...nodes, CHANGES_ONLY, ...removed]);
  }

  async #entriesInTurns(nodes: readonly NodeHealth[], field: number): Promise<Uint8Array[]> {
    const pieces: Uint8Array[] = [];
    for (let at = 0; at < nodes.length; at += HEALTH_NODES_PER_TURN) {
      if (at > 0) await nextTurn();
      pieces.push(this.#entries(nodes.slice(at, at + HEALTH_NODES_PER_TURN), field));
    }
    return pieces;
  }

  /** The entries of one repeated NodeHealth field of NodeHealthReport, one after another. */
  #entries(nodes: readonly NodeHealth[], field: number): Uint8Array {
    const encoded: Uint8Array[] = [];
    let length = 0;
    for (const node of nodes) {
      let bytes = this.#cache.get(node);
      if (bytes === undefined) {
        bytes = encodeNodeHealth(node);
        this.#cache.set(node, bytes);
      }
      encoded.push(bytes);
      length += 1 + varintLength(bytes.length) + bytes.length;
    }
    const out = new Uint8Array(length);
    let at = 0;
    for (const bytes of encoded) {
      out[at++] = field;
      at = writeVarint(out, at, bytes.length);
      out.set(bytes, at);
      at += bytes.length;
    }
    return out;
  }
}

/** StreamSnapshotsRequest.health around the entries: one copy of each piece. */
function withHeader(pieces: readonly Uint8Array[]): Uint8Array {
  const bodyLength = pieces.reduce((sum, piece) => sum + piece.length, 0);
  const out = new Uint8Array(1 + varintLength(bodyLength) + bodyLength);
  out[0] = HEALTH_FIELD;
  let at = writeVarint(out, 1, bodyLength);
  for (const piece of pieces) {
    out.set(piece, at);
    at += piece.length;
  }
  return out;
}

/**
 * NodeHealth as protobuf, written directly: five scalar fields, where the generic encoder spent
 * most of its time on reflection. Proto3 leaves empty strings and zero out, as toBinary does;
 * the test checks the bytes decode to the same message.
 */
export function encodeNodeHealth(node: NodeHealth): Uint8Array {
  const strings = [node.upstream, node.address, node.state, node.evidence];
  let length = 0;
  strings.forEach((text) => {
    if (text === "") return;
    const size = Buffer.byteLength(text, "utf8");
    length += 1 + varintLength(size) + size;
  });
  const changedAt = Number(node.changedAtMs);
  if (changedAt > 0) length += 1 + varintLength(changedAt);
  const out = Buffer.allocUnsafe(length);
  let at = 0;
  strings.forEach((text, i) => {
    if (text === "") return;
    out[at++] = ((i + 1) << 3) | 2;
    at = writeVarint(out, at, Buffer.byteLength(text, "utf8"));
    at += out.write(text, at, "utf8");
  });
  if (changedAt > 0) {
    out[at++] = 5 << 3;
    at = writeVarint(out, at, changedAt);
  }
  return out;
}

function varintLength(value: number): number {
  let length = 1;
  while (value >= 0x80) {
    value = Math.floor(value / 128);
    length += 1;
  }
  return length;
}

function writeVarint(out: Uint8Array, at: number, value: number): number {
  while (value >= 0x80) {
    out[at++] = (value % 128) | 0x80;
    value = Math.floor(value / 128);
  }
  out[at++] = value;
  return at;
}
