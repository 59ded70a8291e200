import type { Snapshot, SnapshotDelta } from "@clawgate/proto";

/**
 * One published version of the config, as the snapshot server sends it. The builder says what
 * the config is and what changed; how that goes on the wire (whole, in parts, or as a delta,
 * encoded once and shared by every stream) is the snapshot server's business.
 */
export interface PublishedSnapshot {
  /**
   * Revision of the newest change to what the snapshot holds (a config document or registered
   * node written or deleted): every replica numbers one config alike, and it only grows.
   */
  readonly version: number;
  /** Per version, not per stream, so every stream can share the encoded bytes. */
  readonly nonce: string;
  /** The whole config at `version`, with part and parts unset. Never mutated after publish. */
  readonly snapshot: Snapshot;
  /**
   * What changed since the version published just before this one (delta.baseVersion), with
   * the same version, nonce and createdAtMs; undefined for the first publish after a start or a
   * relist, when there is nothing to change from.
   */
  readonly delta: SnapshotDelta | undefined;
}
