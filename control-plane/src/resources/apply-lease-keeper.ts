import type { Store } from "../store/store.js";

/** Keeps a big apply's owner lease alive from a timer, not from the apply's own progress. */
export interface ApplyLeaseKeeper {
  /** Throws once etcd said the lease is gone: the apply's remaining batches cannot commit. */
  check(): void;
  stop(): void;
}

/**
 * Refreshes `lease` every third of its TTL until stopped, so two refreshes in a row may fail
 * (etcd briefly unreachable, an event-loop stall) before the lease runs out.
 *
 * Why a timer: the owner key must outlive a slow apply (a long batch, a hook, a busy etcd) for
 * as long as the process lives, and die with it within one TTL when it does not. Renewing only
 * between batches forced a TTL long enough for the slowest batch (30 s), which every other
 * control plane then had to wait out after a crash.
 */
export function keepApplyLeaseAlive(
  store: Pick<Store, "refreshLease">,
  lease: string,
  ttlSeconds: number,
): ApplyLeaseKeeper {
  let lost = false;
  let refreshing = false;
  const timer = setInterval(
    () => {
      if (refreshing || lost) return;
      refreshing = true;
      store
        .refreshLease(lease)
        .then((alive) => {
          if (!alive) lost = true;
        })
        // Unreachable for now: tried again at the next tick; a lease that ran out meanwhile
        // shows as refused then (and the owner compare fails the batches anyway).
        .catch(() => undefined)
        .finally(() => {
          refreshing = false;
        });
    },
    Math.max(100, (ttlSeconds * 1000) / 3),
  );
  // The apply itself keeps the process busy; this timer alone must not keep it alive.
  timer.unref();
  return {
    check() {
      if (lost) throw new Error("the apply's lease expired");
    },
    stop() {
      clearInterval(timer);
    },
  };
}
