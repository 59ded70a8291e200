import { Etcd3 } from "etcd3";
import type { Store, WatchHandlers } from "../store/store.js";

/**
 * Holds the next watch the store opens until `release()`, while the store moves on: with a
 * compaction in between, that watch's start revision is gone when it opens, as after a long
 * etcd outage. The way to make a real store break a watch on purpose.
 */
export function holdNextWatch(inner: Store): {
  store: Store;
  /** Resolves once the watch is asked for: the list before it is done. */
  requested: Promise<void>;
  release: () => void;
} {
  let release: () => void = () => undefined;
  let asked: () => void = () => undefined;
  const requested = new Promise<void>((resolve) => {
    asked = resolve;
  });
  let held: Promise<void> | undefined = new Promise((resolve) => {
    release = resolve;
  });
  const store: Store = {
    ...inner,
    kind: inner.kind,
    txnLimits: inner.txnLimits,
    get: (key, options) => inner.get(key, options),
    range: (prefix, options) => inner.range(prefix, options),
    commit: (compares, operations) => inner.commit(compares, operations),
    grantLease: (ttlSeconds) => inner.grantLease(ttlSeconds),
    refreshLease: (lease) => inner.refreshLease(lease),
    revokeLease: (lease) => inner.revokeLease(lease),
    close: () => inner.close(),
    async watch(prefix: string, fromRevision: number, handlers: WatchHandlers) {
      const wait = held;
      held = undefined;
      if (wait !== undefined) asked();
      await wait;
      return inner.watch(prefix, fromRevision, handlers);
    },
  };
  return { store, requested, release: () => release() };
}

/**
 * Compacts the store's history up to `revision`, so a watch from before it cannot resume: on
 * etcd through its own client (`etcdEndpoint`), on the embedded store by writing past its
 * `historyLimit` (pass it as `embeddedHistoryLimit`).
 */
export async function compactStore(
  store: Store,
  revision: number,
  options: { etcdEndpoint?: string; embeddedHistoryLimit?: number },
): Promise<void> {
  if (store.kind === "etcd") {
    if (options.etcdEndpoint === undefined) throw new Error("compactStore: etcdEndpoint is needed");
    const admin = new Etcd3({ hosts: options.etcdEndpoint });
    try {
      await admin.kv.compact({ revision, physical: true });
    } finally {
      admin.close();
    }
    return;
  }
  const limit = options.embeddedHistoryLimit;
  if (limit === undefined) throw new Error("compactStore: embeddedHistoryLimit is needed");
  for (let i = 0; i <= limit; i++) {
    await store.commit(
      [],
      [{ type: "put", key: "/elsewhere/compaction-filler", value: String(i) }],
    );
  }
}
