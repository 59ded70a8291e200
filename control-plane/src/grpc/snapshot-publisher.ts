import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";

/** Where the snapshot server learns what to send: the builder, or a fake in tests. */
export interface SnapshotPublisher {
  /** The newest published snapshot, or undefined before the first. */
  current(): PublishedSnapshot | undefined;
  /** Calls `listener` after each publish; returns the unsubscribe function. */
  onPublish(listener: (published: PublishedSnapshot) => void): () => void;
}
