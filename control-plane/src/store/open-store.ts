import { openEmbeddedStore } from "./embedded-store.js";
import { openEtcdStore } from "./etcd-store.js";
import type { Store } from "./store.js";

export interface OpenStoreOptions {
  /** etcd client URLs; when empty or absent the embedded store is used. */
  etcdEndpoints?: string[];
  /** File of the embedded store, used only without etcd endpoints. */
  embeddedPath: string;
}

/** Picks the store the CP runs on: etcd when endpoints are configured, else the embedded file. */
export function openStore(options: OpenStoreOptions): Promise<Store> {
  const endpoints = options.etcdEndpoints ?? [];
  return endpoints.length > 0
    ? openEtcdStore({ endpoints })
    : openEmbeddedStore({ path: options.embeddedPath });
}
