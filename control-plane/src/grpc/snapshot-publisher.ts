import type { SnapshotDelta } from "@clawgate/proto";
import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";

/** Where the snapshot server learns what to send: the builder, or a fake in tests. */
export interface SnapshotPublisher {
  /** The newest published snapshot, or undefined before the first. */
  current(): PublishedSnapshot | undefined;
  /** Calls `listener` after each publish; returns the unsubscribe function. */
  onPublish(listener: (published: PublishedSnapshot) => void): () => void;
}

/** A published snapshot as a builder may hand it: with or without what changed. */
type PublishedLike = Omit<PublishedSnapshot, "delta"> & { readonly delta?: SnapshotDelta };

/**
 * A publisher over a builder whose snapshots may carry no delta (the builder before issue 9's
 * delta work): a snapshot without one travels whole, and a delta the builder does carry is
 * passed through untouched, so this stays correct once the builder produces deltas.
 */
export function asSnapshotPublisher(builder: {
  current(): PublishedLike | undefined;
  onPublish(listener: (published: PublishedLike) => void): () => void;
}): SnapshotPublisher {
  return {
    current() {
      const published = builder.current();
      return published === undefined ? undefined : withDelta(published);
    },
    onPublish(listener) {
      return builder.onPublish((published) => listener(withDelta(published)));
    },
  };
}

function withDelta(published: PublishedLike): PublishedSnapshot {
  const { version, nonce, snapshot, delta } = published;
  return { version, nonce, snapshot, delta };
}
