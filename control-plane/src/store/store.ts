/**
 * The contract every config store keeps, etcd's semantics in miniature: one global revision
 * that grows with every write, transactions guarded by per-key revision compares, prefix
 * watches that resume from a revision, and leases that delete their keys when they expire.
 * Both implementations (etcd, embedded file) pass the same contract tests.
 */

export interface KeyValue {
  key: string;
  value: string;
  /** Revision of the write that last changed this key. */
  modRevision: number;
  /** Revision of the write that created this key. */
  createRevision: number;
  /** Lease the key is bound to, if any. */
  lease?: string;
}

export interface RangeResult {
  /** Store revision the read was served at; every item is as of this revision. */
  revision: number;
  items: KeyValue[];
}

/** Holds when `key`'s mod revision equals `modRevision`; 0 means "the key does not exist". */
export interface Compare {
  key: string;
  modRevision: number;
}

export type Operation =
  | { type: "put"; key: string; value: string; lease?: string }
  | { type: "delete"; key: string };

export interface CommitResult {
  /** False when a compare failed; nothing was written then. */
  succeeded: boolean;
  /** Store revision after the commit (unchanged when nothing was written). */
  revision: number;
}

export interface WatchEvent {
  type: "put" | "delete";
  key: string;
  /** Present on put. */
  value?: string;
  /** Revision of the write; for a delete, the revision that deleted the key. */
  modRevision: number;
}

export interface WatchHandlers {
  /** Events of one revision or more, in revision order. */
  onEvents(events: WatchEvent[]): void;
  /** The watch failed for good (for example its start revision was compacted). */
  onError?(error: Error): void;
}

export interface Watch {
  close(): Promise<void>;
}

export interface ReadOptions {
  /**
   * Read the store as it was at this revision (etcd's MVCC history); default the current one.
   * The embedded store keeps no history and refuses any revision but its current one.
   */
  revision?: number;
  /**
   * Read keys and revisions only; every value comes back as "". For reads that only need to
   * know which keys exist (trimming the journal): values never cross the wire.
   */
  keysOnly?: boolean;
}

/** The most one commit may carry; the config service splits bigger writes to fit. */
export interface TxnLimits {
  /** Compares, and operations, per commit (etcd's --max-txn-ops, default 128). */
  maxOps: number;
  /** Bytes of keys and values per commit, with room left under etcd's --max-request-bytes. */
  maxBytes: number;
}

export interface Store {
  readonly kind: "etcd" | "embedded";
  readonly txnLimits: TxnLimits;
  get(key: string, options?: ReadOptions): Promise<KeyValue | undefined>;
  /**
   * Every key under `prefix` (or under each of several prefixes), all read at one revision,
   * sorted by key within each prefix. Large results are read in pages, never as one response.
   */
  range(prefix: string | readonly string[], options?: ReadOptions): Promise<RangeResult>;
  /** Applies `operations` atomically if every compare holds. */
  commit(compares: readonly Compare[], operations: readonly Operation[]): Promise<CommitResult>;
  /** Streams every change under `prefix` whose revision is >= `fromRevision`. */
  watch(prefix: string, fromRevision: number, handlers: WatchHandlers): Promise<Watch>;
  /** Grants a lease that expires after `ttlSeconds` unless refreshed; returns its id. */
  grantLease(ttlSeconds: number): Promise<string>;
  /** Restarts the lease's TTL; false when it has already expired. */
  refreshLease(lease: string): Promise<boolean>;
  /** Ends the lease now and deletes its keys. */
  revokeLease(lease: string): Promise<void>;
  close(): Promise<void>;
}
