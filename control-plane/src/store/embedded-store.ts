import { randomBytes } from "node:crypto";
import { mkdir, open, readFile, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";
import type {
  CommitResult,
  Compare,
  KeyValue,
  Operation,
  RangeResult,
  Store,
  Watch,
  WatchEvent,
  WatchHandlers,
} from "./store.js";
import { type LockHolder, lockStoreFile, type StoreLock } from "./store-lock.js";

export interface EmbeddedStoreOptions {
  /** File that holds the state across restarts; default none (memory only). */
  path?: string;
  /** Revisions of events kept for watches that resume from the past; default 10000. */
  historyLimit?: number;
  /** Told when `path`'s lock, left by a dead process on this host, is taken over; default silent. */
  onStaleLock?: (stale: LockHolder, lockPath: string) => void;
}

/** On-disk shape; lease-bound keys are left out because their leases die with the process. */
interface PersistedState {
  format: 1;
  revision: number;
  keys: Array<{ key: string; value: string; modRevision: number; createRevision: number }>;
}

interface Entry {
  value: string;
  modRevision: number;
  createRevision: number;
  lease?: string;
}

interface Lease {
  ttlMs: number;
  timer: NodeJS.Timeout;
  keys: Set<string>;
}

interface RevisionEvents {
  revision: number;
  events: WatchEvent[];
}

interface Watcher {
  prefix: string;
  handlers: WatchHandlers;
  queue: WatchEvent[][];
  scheduled: boolean;
  closed: boolean;
}

/** Delay before retrying a lease expiry whose deletes could not be written to the file. */
const EXPIRY_RETRY_MS = 1000;

function storeError(code: string, message: string): Error & { code: string } {
  return Object.assign(new Error(message), { code });
}

/**
 * A single-process store with etcd's semantics, for running the control plane without etcd.
 * State lives in memory; with `path` every commit rewrites the file (temp file, fsync, rename)
 * before it becomes visible, so a crash leaves either the old or the new state on disk.
 */
export async function openEmbeddedStore(options: EmbeddedStoreOptions): Promise<Store> {
  const historyLimit = options.historyLimit ?? 10_000;
  if (!Number.isInteger(historyLimit) || historyLimit < 1) {
    throw new RangeError(`historyLimit must be a positive integer, got ${historyLimit}`);
  }
  const path = options.path;
  const data = new Map<string, Entry>();
  // A fresh store is at revision 1 with no keys, as a fresh etcd cluster is, so an empty config
  // reads at a real version both ways and the snapshot builder publishes it on either store.
  let revision = 1;
  // Every revision after `compactedRevision` is in `history`; older ones are gone. A fresh
  // store's history is whole (revision 1 holds no events); a reloaded one starts at the file.
  let compactedRevision = 0;
  // One process per file: the whole state is rewritten on each commit, so a second writer
  // would silently undo the first one's commits. Refused here, before anything is read.
  const lock: StoreLock | undefined =
    path === undefined ? undefined : await lockStoreFile(path, { onTakeover: options.onStaleLock });
  if (path !== undefined) {
    const loaded = await loadState(path).catch((error: unknown) => {
      lock?.release();
      throw error;
    });
    if (loaded !== undefined) {
      revision = loaded.revision;
      compactedRevision = loaded.revision;
      for (const kv of loaded.keys) {
        data.set(kv.key, {
          value: kv.value,
          modRevision: kv.modRevision,
          createRevision: kv.createRevision,
        });
      }
    }
  }

  const history: RevisionEvents[] = [];
  const leases = new Map<string, Lease>();
  const watchers = new Set<Watcher>();
  let tail: Promise<unknown> = Promise.resolve();
  let closed = false;

  function assertOpen(): void {
    if (closed) throw storeError("CLAWGATE_STORE_CLOSED", "embedded store is closed");
  }

  /** Only the present can be read: the embedded store keeps events, not past values. */
  function assertCurrent(wanted: number | undefined): void {
    if (wanted === undefined || wanted === revision) return;
    throw storeError(
      "CLAWGATE_STORE_COMPACTED",
      `embedded store cannot read revision ${wanted}: it keeps only the current revision (${revision})`,
    );
  }

  /** Runs `task` after every earlier commit has finished, so commits never interleave. */
  function serialize<T>(task: () => Promise<T>): Promise<T> {
    const run = tail.then(task);
    tail = run.catch(() => undefined);
    return run;
  }

  function snapshotOf(key: string, entry: Entry): KeyValue {
    const kv: KeyValue = {
      key,
      value: entry.value,
      modRevision: entry.modRevision,
      createRevision: entry.createRevision,
    };
    if (entry.lease !== undefined) kv.lease = entry.lease;
    return kv;
  }

  function schedule(watcher: Watcher): void {
    if (watcher.scheduled) return;
    watcher.scheduled = true;
    // Handlers always run on a later tick, never inside the commit that caused them.
    setImmediate(() => {
      watcher.scheduled = false;
      while (!watcher.closed && watcher.queue.length > 0) {
        const batch = watcher.queue.shift() as WatchEvent[];
        watcher.handlers.onEvents(batch);
      }
    });
  }

  function publish(entry: RevisionEvents): void {
    history.push(entry);
    while (history.length > historyLimit) {
      compactedRevision = (history.shift() as RevisionEvents).revision;
    }
    for (const watcher of watchers) {
      const events = entry.events.filter((event) => event.key.startsWith(watcher.prefix));
      if (events.length === 0) continue;
      watcher.queue.push(events);
      schedule(watcher);
    }
  }

  /**
   * Applies a validated change set as one new revision: persists it first so nothing is
   * visible that is not yet on disk, then swaps it into memory and notifies watchers.
   */
  async function apply(operations: readonly Operation[]): Promise<number> {
    const next = revision + 1;
    const changes: Array<{ key: string; entry: Entry | undefined }> = [];
    const events: WatchEvent[] = [];
    for (const op of operations) {
      const current = data.get(op.key);
      if (op.type === "delete") {
        if (current === undefined) continue;
        changes.push({ key: op.key, entry: undefined });
        events.push({ type: "delete", key: op.key, modRevision: next });
        continue;
      }
      const entry: Entry = {
        value: op.value,
        modRevision: next,
        createRevision: current?.createRevision ?? next,
      };
      if (op.lease !== undefined) entry.lease = op.lease;
      changes.push({ key: op.key, entry });
      events.push({ type: "put", key: op.key, value: op.value, modRevision: next });
    }
    if (changes.length === 0) return revision;

    if (path !== undefined) {
      const view = new Map(data);
      for (const change of changes) {
        if (change.entry === undefined) view.delete(change.key);
        else view.set(change.key, change.entry);
      }
      await saveState(path, next, view);
    }

    for (const change of changes) {
      const previous = data.get(change.key);
      if (previous?.lease !== undefined) leases.get(previous.lease)?.keys.delete(change.key);
      if (change.entry === undefined) {
        data.delete(change.key);
      } else {
        data.set(change.key, change.entry);
        if (change.entry.lease !== undefined) {
          leases.get(change.entry.lease)?.keys.add(change.key);
        }
      }
    }
    revision = next;
    publish({ revision: next, events });
    return next;
  }

  /** Ends a lease; with `expiredTimer`, only if no refresh re-armed it while this waited. */
  function endLease(id: string, expiredTimer?: NodeJS.Timeout): Promise<void> {
    return serialize(async () => {
      const lease = leases.get(id);
      if (lease === undefined) return;
      if (expiredTimer !== undefined && lease.timer !== expiredTimer) return;
      const deletes: Operation[] = [...lease.keys].map((key) => ({ type: "delete", key }));
      // Delete the keys first: if the file write fails the lease stays, so a retry can finish.
      await apply(deletes);
      clearTimeout(lease.timer);
      leases.delete(id);
    });
  }

  function armTimer(id: string, ttlMs: number): NodeJS.Timeout {
    const timer: NodeJS.Timeout = setTimeout(() => {
      endLease(id, timer).catch(() => {
        // The store file could not be written; try the expiry again rather than leak the keys.
        const lease = leases.get(id);
        if (lease !== undefined && lease.timer === timer && !closed) {
          lease.timer = armTimer(id, EXPIRY_RETRY_MS);
        }
      });
    }, ttlMs);
    // A lease must not keep the process alive on its own.
    timer.unref();
    return timer;
  }

  const store: Store = {
    kind: "embedded",

    // Commits are applied whole in memory, so one commit never needs splitting.
    txnLimits: { maxOps: Number.POSITIVE_INFINITY, maxBytes: Number.POSITIVE_INFINITY },

    async get(key, options) {
      assertOpen();
      assertCurrent(options?.revision);
      const entry = data.get(key);
      return entry === undefined ? undefined : snapshotOf(key, entry);
    },

    async range(prefix, options): Promise<RangeResult> {
      assertOpen();
      assertCurrent(options?.revision);
      const items: KeyValue[] = [];
      for (const one of typeof prefix === "string" ? [prefix] : prefix) {
        const found: KeyValue[] = [];
        for (const [key, entry] of data) {
          if (!key.startsWith(one)) continue;
          const item = snapshotOf(key, entry);
          found.push(options?.keysOnly === true ? { ...item, value: "" } : item);
        }
        found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
        items.push(...found);
      }
      return { revision, items };
    },

    commit(compares: readonly Compare[], operations: readonly Operation[]) {
      assertOpen();
      const seen = new Set<string>();
      for (const op of operations) {
        // etcd rejects a transaction that touches one key twice; keep the same rule.
        if (seen.has(op.key)) {
          return Promise.reject(
            storeError("CLAWGATE_STORE_DUPLICATE_KEY", `commit touches key "${op.key}" twice`),
          );
        }
        seen.add(op.key);
      }
      return serialize(async (): Promise<CommitResult> => {
        assertOpen();
        for (const compare of compares) {
          const actual = data.get(compare.key)?.modRevision ?? 0;
          if (actual !== compare.modRevision) return { succeeded: false, revision };
        }
        for (const op of operations) {
          if (op.type === "put" && op.lease !== undefined && !leases.has(op.lease)) {
            throw storeError("CLAWGATE_STORE_LEASE_NOT_FOUND", `lease ${op.lease} not found`);
          }
        }
        return { succeeded: true, revision: await apply(operations) };
      });
    },

    async watch(prefix, fromRevision, handlers): Promise<Watch> {
      assertOpen();
      const watcher: Watcher = { prefix, handlers, queue: [], scheduled: false, closed: false };
      // Like etcd, a start revision of 0 or less means "changes from now on".
      if (fromRevision > 0 && fromRevision <= compactedRevision) {
        setImmediate(() => {
          handlers.onError?.(
            storeError(
              "CLAWGATE_STORE_COMPACTED",
              `watch from revision ${fromRevision} is not possible: history is compacted up to revision ${compactedRevision}`,
            ),
          );
        });
        return { close: async () => undefined };
      }
      const replay: WatchEvent[] = [];
      for (const entry of history) {
        if (entry.revision < fromRevision) continue;
        for (const event of entry.events) {
          if (event.key.startsWith(prefix)) replay.push(event);
        }
      }
      if (replay.length > 0) {
        watcher.queue.push(replay);
        schedule(watcher);
      }
      watchers.add(watcher);
      return {
        async close() {
          watcher.closed = true;
          watcher.queue.length = 0;
          watchers.delete(watcher);
        },
      };
    },

    async grantLease(ttlSeconds) {
      assertOpen();
      if (!(ttlSeconds > 0)) throw new RangeError(`ttlSeconds must be positive, got ${ttlSeconds}`);
      const id = randomBytes(8).toString("hex");
      const ttlMs = ttlSeconds * 1000;
      leases.set(id, { ttlMs, timer: armTimer(id, ttlMs), keys: new Set() });
      return id;
    },

    async refreshLease(id) {
      assertOpen();
      const lease = leases.get(id);
      if (lease === undefined) return false;
      clearTimeout(lease.timer);
      lease.timer = armTimer(id, lease.ttlMs);
      return true;
    },

    async revokeLease(id) {
      assertOpen();
      await endLease(id);
    },

    async close() {
      if (closed) return;
      closed = true;
      for (const lease of leases.values()) clearTimeout(lease.timer);
      leases.clear();
      for (const watcher of watchers) {
        watcher.closed = true;
        watcher.queue.length = 0;
      }
      watchers.clear();
      await tail;
      lock?.release();
    },
  };
  return store;
}

async function loadState(path: string): Promise<PersistedState | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  let parsed: PersistedState;
  try {
    parsed = JSON.parse(text) as PersistedState;
  } catch (error) {
    throw storeError(
      "CLAWGATE_STORE_CORRUPT",
      `embedded store file ${path} is not valid JSON: ${(error as Error).message}`,
    );
  }
  if (parsed?.format !== 1 || !Number.isInteger(parsed.revision) || !Array.isArray(parsed.keys)) {
    throw storeError(
      "CLAWGATE_STORE_CORRUPT",
      `embedded store file ${path} has an unknown layout (expected format 1)`,
    );
  }
  return parsed;
}

async function saveState(path: string, revision: number, data: Map<string, Entry>): Promise<void> {
  const state: PersistedState = { format: 1, revision, keys: [] };
  for (const [key, entry] of data) {
    if (entry.lease !== undefined) continue;
    state.keys.push({
      key,
      value: entry.value,
      modRevision: entry.modRevision,
      createRevision: entry.createRevision,
    });
  }
  await mkdir(dirname(path), { recursive: true });
  const temp = `${path}.${process.pid}.tmp`;
  const handle = await open(temp, "w", 0o600);
  try {
    await handle.writeFile(JSON.stringify(state));
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}
