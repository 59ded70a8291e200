import { create, type Snapshot, SnapshotSchema } from "@clawgate/proto";

/** Most parts one snapshot may announce; at the 64 MiB message limit that is far beyond any config. */
export const DEFAULT_MAX_PARTS = 4_096;

/**
 * Most resources one assembly may hold: 10 times issue 9's scale (20,000 resources, about
 * 50 MB). Past it the assembly is dropped and the part refused, so a stream announcing
 * endless parts cannot grow the data plane's memory without bound.
 */
export const DEFAULT_MAX_RESOURCES = 200_000;

export type PartResult =
  /** The snapshot is whole: it came in one message, or this part was its last missing one. */
  | { status: "whole"; snapshot: Snapshot }
  /** Kept; more parts are due. */
  | { status: "waiting" }
  /** A late part of an older version than the one being assembled: dropped. */
  | { status: "stale" }
  /** The part cannot belong to any snapshot (bad numbering): NACK it. */
  | { status: "refused"; reason: string };

/**
 * Puts a snapshot that travels in parts back together (Snapshot.part/parts: same version and
 * nonce, numbered 0..parts-1, in any order). Only one snapshot is assembled at a time: a part
 * of another version or nonce drops the incomplete one, so memory holds at most one snapshot's
 * parts, and a snapshot with a part missing is never applied.
 */
export class SnapshotParts {
  readonly #maxParts: number;
  readonly #maxResources: number;
  #resources = 0;
  #key: string | undefined;
  #version: bigint | undefined;
  #parts: (Snapshot | undefined)[] = [];
  #received = 0;

  constructor(maxParts = DEFAULT_MAX_PARTS, maxResources = DEFAULT_MAX_RESOURCES) {
    this.#maxParts = maxParts;
    this.#maxResources = maxResources;
  }

  /** Parts held for the snapshot being assembled. */
  get pending(): number {
    return this.#received;
  }

  add(message: Snapshot): PartResult {
    const { part, parts } = message;
    if (parts <= 1) {
      if (part !== 0) return refused(`part ${part} of a snapshot in ${parts} part(s)`);
      this.#drop();
      return { status: "whole", snapshot: message };
    }
    if (parts > this.#maxParts) {
      this.#drop();
      return refused(`announces ${parts} parts, over the limit of ${this.#maxParts}`);
    }
    if (part >= parts) return refused(`part ${part} is beyond parts 0..${parts - 1}`);
    const key = `${message.version}/${message.nonce}/${parts}`;
    // Versions only grow: a late part of an older one must not displace a newer assembly.
    if (this.#version !== undefined && message.version < this.#version) return { status: "stale" };
    if (key !== this.#key) {
      this.#drop();
      this.#key = key;
      this.#version = message.version;
      this.#parts = new Array(parts).fill(undefined);
    }
    if (this.#parts[part] !== undefined) return { status: "waiting" };
    this.#resources += resourceCount(message);
    if (this.#resources > this.#maxResources) {
      this.#drop();
      return refused(`snapshot holds over ${this.#maxResources} resources`);
    }
    this.#received += 1;
    this.#parts[part] = message;
    if (this.#received < parts) return { status: "waiting" };
    const whole = merge(this.#parts as Snapshot[]);
    this.#drop();
    return { status: "whole", snapshot: whole };
  }

  #drop(): void {
    this.#key = undefined;
    this.#version = undefined;
    this.#parts = [];
    this.#received = 0;
    this.#resources = 0;
  }
}

function resourceCount(part: Snapshot): number {
  return part.routes.length + part.upstreams.length + part.breakers.length + part.tenants.length;
}

function merge(parts: readonly Snapshot[]): Snapshot {
  const first = parts[0]!;
  const whole = create(SnapshotSchema, { version: first.version, nonce: first.nonce });
  for (const part of parts) {
    if (part.createdAtMs > whole.createdAtMs) whole.createdAtMs = part.createdAtMs;
    // A loop, not push(...list): a part of 100,000 resources would overflow the call stack.
    for (const route of part.routes) whole.routes.push(route);
    for (const upstream of part.upstreams) whole.upstreams.push(upstream);
    for (const breaker of part.breakers) whole.breakers.push(breaker);
    for (const tenant of part.tenants) whole.tenants.push(tenant);
  }
  return whole;
}

function refused(reason: string): PartResult {
  return { status: "refused", reason: `snapshot part refused: ${reason}` };
}
