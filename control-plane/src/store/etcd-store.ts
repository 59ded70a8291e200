import { ConsecutiveBreaker, circuitBreaker, handleWhen } from "cockatiel";
import {
  CompareResult,
  CompareTarget,
  Etcd3,
  type ICompare,
  type IKeyValue,
  type IRequestOp,
  isRecoverableError,
  type Watcher,
} from "etcd3";
import type { KeyValue, RangeResult, Store, Watch, WatchEvent } from "./store.js";

/**
 * The per-host breaker etcd3 puts in front of every call, as its default (3 consecutive
 * recoverable failures open it) but half-open after 1 s instead of 5 s: the breaker is shared
 * by every call, config writes included, so a short etcd blip (or a burst that made a few calls
 * fail) otherwise refuses all of them for 5 s after etcd is back.
 */
const HOST_BREAKER_HALF_OPEN_MS = 1_000;
const HOST_BREAKER_FAILURES = 3;

function hostBreaker() {
  return circuitBreaker(handleWhen(isRecoverableError), {
    halfOpenAfter: HOST_BREAKER_HALF_OPEN_MS,
    breaker: new ConsecutiveBreaker(HOST_BREAKER_FAILURES),
  });
}

export interface EtcdStoreOptions {
  /** Client URLs, for example ["http://127.0.0.1:2379"]. */
  endpoints: string[];
  /** How long to wait for a connection before a call fails; default 5000 ms. */
  dialTimeoutMs?: number;
  /** Keys per range response; default 500 (a few MB at most for config documents). */
  pageSize?: number;
  /** The cluster's --max-txn-ops; default 128, etcd's own default. */
  maxTxnOps?: number;
  /** The cluster's --max-request-bytes; default 1.5 MiB, etcd's own default. */
  maxRequestBytes?: number;
}

/** etcd's defaults: `--max-txn-ops 128`, `--max-request-bytes 1572864`. */
const ETCD_DEFAULT_MAX_TXN_OPS = 128;
const ETCD_DEFAULT_MAX_REQUEST_BYTES = 1.5 * 1024 * 1024;
/** Room left in each request for protobuf framing, compares and the guard keys. */
const REQUEST_BYTES_HEADROOM = 256 * 1024;
const DEFAULT_PAGE_SIZE = 500;
/**
 * A belt only: reads are paged, so no response should come near gRPC's 4 MB default; this just
 * keeps one oversized page (a few huge documents) from failing every read.
 */
const MAX_RECEIVE_BYTES = 64 * 1024 * 1024;

/** Bounds the watch cancels in close() so shutdown never hangs on a dead etcd. */
const CLOSE_REVOKE_TIMEOUT_MS = 2000;

/** Fresh starts of a paged read that etcd compacted under, before giving up. */
const COMPACTED_READ_ATTEMPTS = 5;

function isCompacted(error: unknown): boolean {
  return /required revision has been compacted/i.test((error as Error)?.message ?? "");
}

function storeError(code: string, message: string): Error & { code: string } {
  return Object.assign(new Error(message), { code });
}

function bytes(text: string): Buffer {
  return Buffer.from(text, "utf8");
}

/** The smallest key greater than every key starting with `prefix`, as etcd's range_end. */
function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] as number) < 0xff) {
      end[i] = (end[i] as number) + 1;
      return end.subarray(0, i + 1);
    }
  }
  // Empty prefix (or all 0xff): "\0" as range_end means "to the end of the keyspace".
  return Buffer.from([0]);
}

function toKeyValue(kv: IKeyValue): KeyValue {
  const out: KeyValue = {
    key: kv.key.toString("utf8"),
    value: kv.value.toString("utf8"),
    modRevision: Number(kv.mod_revision),
    createRevision: Number(kv.create_revision),
  };
  if (kv.lease !== undefined && kv.lease !== "0" && kv.lease !== "") out.lease = String(kv.lease);
  return out;
}

/** Store backed by an etcd v3 cluster; every call maps to one etcd RPC. */
export async function openEtcdStore(options: EtcdStoreOptions): Promise<Store> {
  if (options.endpoints.length === 0) throw new RangeError("endpoints must not be empty");
  const pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
  if (!(Number.isInteger(pageSize) && pageSize > 0)) {
    throw new RangeError(`pageSize must be a positive integer, got ${pageSize}`);
  }
  const maxRequestBytes = options.maxRequestBytes ?? ETCD_DEFAULT_MAX_REQUEST_BYTES;
  const client = new Etcd3({
    hosts: options.endpoints,
    dialTimeout: options.dialTimeoutMs ?? 5000,
    grpcOptions: { "grpc.max_receive_message_length": MAX_RECEIVE_BYTES },
    faultHandling: { host: hostBreaker },
  });
  const watchers = new Set<Watcher>();
  let closed = false;

  function assertOpen(): void {
    if (closed) throw storeError("CLAWGATE_STORE_CLOSED", "etcd store is closed");
  }

  async function revoke(lease: string): Promise<void> {
    try {
      await client.leaseClient.leaseRevoke({ ID: lease });
    } catch (error) {
      // Revoking an expired lease is success: its keys are already gone.
      if (!/lease not found/i.test((error as Error).message)) throw error;
    }
  }

  /**
   * etcd 3.4 cancels a watch on a compacted revision with an empty reason, so ask etcd
   * directly whether `fromRevision` is still readable to tell compaction apart.
   */
  async function explainCancel(prefix: string, fromRevision: number, error: Error): Promise<Error> {
    let compacted = /compacted/i.test(error.message);
    if (!compacted && fromRevision > 0 && !closed) {
      try {
        const key = bytes(prefix);
        await client.kv.range({
          key: key.length === 0 ? Buffer.from([0]) : key,
          range_end: prefixEnd(key),
          revision: fromRevision,
          limit: 1,
        });
      } catch (probe) {
        compacted = /compacted/i.test((probe as Error).message);
      }
    }
    if (!compacted) return error;
    return storeError(
      "CLAWGATE_STORE_COMPACTED",
      `watch from revision ${fromRevision} is not possible: etcd has compacted that revision`,
    );
  }

  /**
   * Reads everything under `prefix` in pages of `pageSize` keys, each page pinned to `revision`
   * (0: the first page's), so the pages together are one consistent read however large.
   */
  async function rangePaged(
    prefix: string,
    revision: number,
    keysOnly: boolean,
  ): Promise<{ revision: number; items: KeyValue[] }> {
    const start = bytes(prefix);
    const end = prefixEnd(start);
    let from = start.length === 0 ? Buffer.from([0]) : start;
    let pinned = revision;
    const items: KeyValue[] = [];
    while (true) {
      const res = await client.kv.range({
        key: from,
        range_end: end,
        limit: pageSize,
        ...(pinned > 0 ? { revision: pinned } : {}),
        ...(keysOnly ? { keys_only: true } : {}),
      });
      if (pinned === 0) pinned = Number(res.header.revision);
      for (const kv of res.kvs) items.push(toKeyValue(kv));
      const last = res.kvs[res.kvs.length - 1];
      if (!res.more || last === undefined) return { revision: pinned, items };
      // The next page starts just after the last key read: that key plus a zero byte.
      from = Buffer.concat([last.key, Buffer.from([0])]);
    }
  }

  /** Every key under each of `prefixes`, all at `revision` (0: the first page's). */
  async function rangeAt(
    prefixes: readonly string[],
    revision: number,
    keysOnly: boolean,
  ): Promise<RangeResult> {
    let pinned = revision;
    const items: KeyValue[] = [];
    for (const one of prefixes) {
      const read = await rangePaged(one, pinned, keysOnly);
      pinned = read.revision;
      items.push(...read.items);
    }
    if (pinned === 0) {
      // No prefixes at all: still report the revision the store is at.
      const res = await client.kv.range({ key: Buffer.from([0]), limit: 1, count_only: true });
      pinned = Number(res.header.revision);
    }
    return { revision: pinned, items };
  }

  const store: Store = {
    kind: "etcd",
    txnLimits: {
      maxOps: options.maxTxnOps ?? ETCD_DEFAULT_MAX_TXN_OPS,
      maxBytes: Math.max(64 * 1024, maxRequestBytes - REQUEST_BYTES_HEADROOM),
    },

    async get(key, readOptions) {
      assertOpen();
      const revision = readOptions?.revision;
      let res: Awaited<ReturnType<typeof client.kv.range>>;
      try {
        res = await client.kv.range({
          key: bytes(key),
          ...(revision !== undefined ? { revision } : {}),
        });
      } catch (error) {
        // Named as range names it, so callers can fall back to what outlives compaction.
        if (!isCompacted(error)) throw error;
        throw storeError(
          "CLAWGATE_STORE_COMPACTED",
          `cannot read revision ${revision}: etcd has compacted it`,
        );
      }
      const kv = res.kvs[0];
      return kv === undefined ? undefined : toKeyValue(kv);
    },

    async range(prefix, readOptions) {
      assertOpen();
      const asked = readOptions?.revision;
      const keysOnly = readOptions?.keysOnly === true;
      const prefixes = typeof prefix === "string" ? [prefix] : prefix;
      // The pages of one read are pinned to one revision; a compaction past it between two
      // pages (etcd's auto-compaction, or an operator's) makes the next page fail. A read
      // pinned by nobody starts again from the newest revision: its result is as consistent,
      // only newer. A revision the caller asked for cannot be read any more: say so by name.
      for (let attempt = 1; ; attempt++) {
        try {
          return await rangeAt(prefixes, asked ?? 0, keysOnly);
        } catch (error) {
          if (!isCompacted(error)) throw error;
          if (asked !== undefined) {
            throw storeError(
              "CLAWGATE_STORE_COMPACTED",
              `cannot read revision ${asked}: etcd has compacted it`,
            );
          }
          if (attempt >= COMPACTED_READ_ATTEMPTS) {
            throw storeError(
              "CLAWGATE_STORE_COMPACTED",
              `etcd compacted past the revision of a paged read ${attempt} times in a row; try again`,
            );
          }
        }
      }
    },

    async commit(compares, operations) {
      assertOpen();
      const compare: ICompare[] = compares.map((c) =>
        c.modRevision === 0
          ? // An absent key has version 0; this is how etcd spells "does not exist".
            {
              key: bytes(c.key),
              target: CompareTarget.Version,
              result: CompareResult.Equal,
              version: 0,
            }
          : {
              key: bytes(c.key),
              target: CompareTarget.Mod,
              result: CompareResult.Equal,
              mod_revision: c.modRevision,
            },
      );
      const success: IRequestOp[] = operations.map((op) =>
        op.type === "put"
          ? {
              request_put: {
                key: bytes(op.key),
                value: bytes(op.value),
                ...(op.lease !== undefined ? { lease: op.lease } : {}),
              },
            }
          : { request_delete_range: { key: bytes(op.key) } },
      );
      const res = await client.kv.txn({ compare, success, failure: [] });
      return { succeeded: res.succeeded, revision: Number(res.header.revision) };
    },

    async watch(prefix, fromRevision, handlers): Promise<Watch> {
      assertOpen();
      let builder = client.watch().prefix(prefix);
      // Like etcd, a start revision of 0 or less means "changes from now on".
      if (fromRevision > 0) builder = builder.startRevision(String(fromRevision));
      const watcher = await builder.create();
      watchers.add(watcher);
      let done = false;
      watcher.on("data", (res) => {
        if (done) return;
        // A response may carry several revisions; hand them over one revision at a time.
        let batch: WatchEvent[] = [];
        for (const event of res.events) {
          const modRevision = Number(event.kv.mod_revision);
          const previous = batch[batch.length - 1];
          if (previous !== undefined && previous.modRevision !== modRevision) {
            handlers.onEvents(batch);
            batch = [];
          }
          const key = event.kv.key.toString("utf8");
          batch.push(
            event.type === "Delete"
              ? { type: "delete", key, modRevision }
              : { type: "put", key, value: event.kv.value.toString("utf8"), modRevision },
          );
        }
        if (batch.length > 0) handlers.onEvents(batch);
      });
      // etcd3 reconnects by itself after "disconnected"; "error" means etcd cancelled the
      // watch (compaction, permissions), which is final.
      watcher.on("error", (error) => {
        if (done) return;
        done = true;
        watchers.delete(watcher);
        explainCancel(prefix, fromRevision, error).then((reason) => handlers.onError?.(reason));
      });
      return {
        async close() {
          if (done) return;
          done = true;
          watchers.delete(watcher);
          await watcher.cancel();
        },
      };
    },

    async grantLease(ttlSeconds) {
      assertOpen();
      if (!(ttlSeconds > 0)) throw new RangeError(`ttlSeconds must be positive, got ${ttlSeconds}`);
      const res = await client.leaseClient.leaseGrant({ TTL: Math.ceil(ttlSeconds), ID: 0 });
      if (res.error) throw new Error(`etcd refused the lease: ${res.error}`);
      return res.ID;
    },

    async refreshLease(lease) {
      assertOpen();
      const stream = await client.leaseClient.leaseKeepAlive();
      try {
        const res = await new Promise<{ TTL: string }>((resolve, reject) => {
          stream.on("data", resolve);
          stream.on("error", reject);
          stream.write({ ID: lease });
        });
        // etcd answers a keepalive for an expired or unknown lease with TTL 0.
        return Number(res.TTL) > 0;
      } finally {
        stream.end();
      }
    },

    async revokeLease(lease) {
      assertOpen();
      await revoke(lease);
    },

    async close() {
      if (closed) return;
      closed = true;
      const cancels = [...watchers].map((w) => w.cancel().catch(() => undefined));
      watchers.clear();
      // Leases are left to their TTL on purpose: a registration lease belongs to the node that
      // renews it (through any control plane), not to the replica that granted it, so a
      // control-plane restart must not drop registered nodes from the snapshot.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(cancels),
        new Promise((resolve) => {
          timer = setTimeout(resolve, CLOSE_REVOKE_TIMEOUT_MS);
        }),
      ]);
      clearTimeout(timer);
      client.close();
    },
  };
  return store;
}
