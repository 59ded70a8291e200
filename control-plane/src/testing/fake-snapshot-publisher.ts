import {
  create,
  NodeSchema,
  SnapshotDeltaSchema,
  SnapshotSchema,
  type Upstream,
  UpstreamSchema,
} from "@clawgate/proto";
import type { SnapshotPublisher } from "../grpc/snapshot-publisher.js";
import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";

export interface FakeChange {
  /**
   * Upstreams added or changed, by name, each with `nodes` nodes (default 1) whose addresses
   * are padded to `addressLength` characters (to make a big config from few objects).
   */
  put?: Array<{ name: string; nodes?: number; addressLength?: number }>;
  /** Upstreams removed, by name. */
  remove?: string[];
  /** Publish without a delta, as the builder does after a start or a relist; default false. */
  withoutDelta?: boolean;
}

/**
 * Publishes snapshots the way the snapshot builder hands them to the snapshot server (version,
 * nonce, the whole config, the delta from the version before), without a store, so snapshot
 * server tests choose every version and delta. The config holds upstreams only: the server
 * treats every resource kind alike.
 */
export class FakeSnapshotPublisher implements SnapshotPublisher {
  private readonly upstreams = new Map<string, Upstream>();
  private readonly listeners = new Set<(published: PublishedSnapshot) => void>();
  private published: PublishedSnapshot | undefined;
  private version: number;

  /** `firstVersion` is the version of the first publish. */
  constructor(
    private readonly instanceId = "cp",
    firstVersion = 10,
  ) {
    this.version = firstVersion - 1;
  }

  current(): PublishedSnapshot | undefined {
    return this.published;
  }

  onPublish(listener: (published: PublishedSnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Applies `change` at the next version, publishes it and returns it. */
  publish(change: FakeChange): PublishedSnapshot {
    const previous = this.published;
    const version = ++this.version;
    const nonce = `${this.instanceId}-${version}`;
    const createdAtMs = BigInt(1_700_000_000_000 + version);
    const put = (change.put ?? []).map(({ name, nodes, addressLength }) =>
      upstream(name, nodes ?? 1, addressLength ?? 0),
    );
    for (const resource of put) this.upstreams.set(resource.name, resource);
    for (const name of change.remove ?? []) this.upstreams.delete(name);
    const snapshot = create(SnapshotSchema, {
      version: BigInt(version),
      nonce,
      createdAtMs,
      upstreams: [...this.upstreams.values()].sort((a, b) => a.name.localeCompare(b.name)),
    });
    const delta =
      previous === undefined || change.withoutDelta === true
        ? undefined
        : create(SnapshotDeltaSchema, {
            version: BigInt(version),
            nonce,
            baseVersion: BigInt(previous.version),
            createdAtMs,
            upstreams: put,
            removedUpstreams: change.remove ?? [],
          });
    this.published = { version, nonce, snapshot, delta };
    for (const listener of [...this.listeners]) listener(this.published);
    return this.published;
  }
}

/** An upstream of `nodes` nodes on distinct ports, host names padded to `addressLength`. */
function upstream(name: string, nodes: number, addressLength: number): Upstream {
  return create(UpstreamSchema, {
    name,
    breaker: "default",
    nodes: Array.from({ length: nodes }, (_, i) =>
      create(NodeSchema, {
        address: `${"n".repeat(Math.max(1, addressLength - 6))}:${1024 + (i % 60_000)}`,
        weight: 1,
        source: "config",
      }),
    ),
  });
}
