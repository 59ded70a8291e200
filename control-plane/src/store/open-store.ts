import type { Logger } from "pino";
import { openEmbeddedStore } from "./embedded-store.js";
import { openEtcdStore } from "./etcd-store.js";
import type { Store } from "./store.js";
import { waitForEtcd } from "./wait-for-etcd.js";

export interface OpenStoreOptions {
  /** etcd client URLs; when empty or absent the embedded store is used. */
  etcdEndpoints?: string[];
  /** File of the embedded store, used only without etcd endpoints. */
  embeddedPath: string;
  /** A key read to check that etcd answers; default "/clawgate/". */
  probeKey?: string;
  /** Logs each failed attempt to reach etcd and a taken-over stale lock; default silent. */
  logger?: Pick<Logger, "warn">;
  /** Told after each failed attempt to reach etcd, with the one-line reason; default none. */
  onUnreachable?: (message: string) => void | Promise<void>;
  /** Waits between attempts to reach etcd; default full jitter from 200 ms up to 5 s. */
  backoff?: { next(): number };
}

/**
 * Picks the store the CP runs on: etcd when endpoints are configured (resolving once etcd has
 * answered, retrying until it does), else the embedded file (locked for this process).
 */
export async function openStore(options: OpenStoreOptions): Promise<Store> {
  const endpoints = options.etcdEndpoints ?? [];
  const logger = options.logger;
  if (endpoints.length === 0) {
    return openEmbeddedStore({
      path: options.embeddedPath,
      onStaleLock: (stale, lockPath) =>
        logger?.warn(
          { lockFile: lockPath, stalePid: stale.pid, since: stale.startedAt },
          `taking over the embedded store's lock: its holder (pid ${stale.pid}) is no longer running`,
        ),
    });
  }
  const store = await openEtcdStore({ endpoints });
  await waitForEtcd(store, {
    endpoints,
    probeKey: options.probeKey ?? "/clawgate/",
    backoff: options.backoff,
    onUnreachable: async (message) => {
      logger?.warn(message);
      await options.onUnreachable?.(message);
    },
  });
  return store;
}
