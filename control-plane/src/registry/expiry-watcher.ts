import type { Logger } from "pino";
import type { HealEventInput } from "../journal/heal-event.js";
import type { Journal } from "../journal/journal.js";
import type { KeyValue, Store, Watch, WatchEvent } from "../store/store.js";
import type { GoneMarker } from "./node-registry.js";
import { parseRegistration } from "./registered-node.js";
import { parseRegistryKey, registryGoneKey, registryPrefix } from "./registry-key.js";

export interface RegistryExpiryWatcherOptions {
  store: Store;
  /** Key prefix with its trailing slash (e.g. "/clawgate/"). */
  prefix: string;
  journal: Journal;
  /** `source` of the events this watcher journals, e.g. "control-plane/cp-1". */
  source: string;
  logger: Pick<Logger, "debug" | "info" | "warn" | "error">;
  /** Delay before re-watching after the watch fails; default 1000 ms. */
  retryMs?: number;
}

/** How a watcher read one registry key's delete. */
export interface RegistryDeletion {
  upstream: string;
  id: string;
  /** Revision that deleted the key. */
  revision: number;
  /**
   * expired: this watcher journaled registry_expiry; deregistered: an explicit DELETE;
   * already-journaled: another control plane recorded this expiry first.
   */
  verdict: "expired" | "deregistered" | "already-journaled";
}

export type DeletionListener = (deletion: RegistryDeletion) => void;

/** What was last known about a registry key, to say which node expired. */
interface KnownNode {
  address: string;
  ttlSeconds: number;
}

/** Claims per expiry before giving up (another control plane keeps changing the marker). */
const MAX_CLAIM_ATTEMPTS = 5;

/**
 * Journals `registry_expiry` when a registered node's key disappears without an explicit
 * deregistration. A deregistration commits a "deregistered" gone marker with the delete, so a
 * delete whose revision the marker does not cover was an expiry (or a delete around the API).
 * The expiry is recorded together with an "expired" marker in one guarded commit, so with
 * several control planes watching, exactly one of them journals it.
 */
export class RegistryExpiryWatcher {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #journal: Journal;
  readonly #source: string;
  readonly #logger: RegistryExpiryWatcherOptions["logger"];
  readonly #retryMs: number;
  readonly #known = new Map<string, KnownNode>();
  readonly #listeners = new Set<DeletionListener>();
  #watch: Watch | undefined;
  #revision = 0;
  #generation = 0;
  #chain: Promise<unknown> = Promise.resolve();
  #retryTimer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: RegistryExpiryWatcherOptions) {
    this.#store = options.store;
    this.#prefix = options.prefix;
    this.#journal = options.journal;
    this.#source = options.source;
    this.#logger = options.logger;
    this.#retryMs = options.retryMs ?? 1_000;
  }

  /** Reads the registered nodes and starts watching; rejects if that first read fails. */
  async start(): Promise<void> {
    const range = await this.#store.range(registryPrefix(this.#prefix));
    this.#known.clear();
    for (const item of range.items) this.#remember(item);
    this.#revision = range.revision;
    await this.#openWatch();
  }

  /** Stops watching and waits for expiries being journaled. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#generation++;
    clearTimeout(this.#retryTimer);
    const watch = this.#watch;
    this.#watch = undefined;
    await watch?.close().catch(() => undefined);
    await this.#chain;
  }

  /** Calls `listener` once each registry delete is classified; returns the unsubscribe. */
  onDeletion(listener: DeletionListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  async #openWatch(): Promise<void> {
    const generation = ++this.#generation;
    const watch = await this.#store.watch(registryPrefix(this.#prefix), this.#revision + 1, {
      onEvents: (events) => {
        if (generation === this.#generation) this.#onEvents(events);
      },
      onError: (error) => {
        if (generation === this.#generation) this.#rewatch(error);
      },
    });
    if (generation !== this.#generation) {
      await watch.close();
      return;
    }
    this.#watch = watch;
  }

  #onEvents(events: WatchEvent[]): void {
    for (const event of events) {
      this.#revision = Math.max(this.#revision, event.modRevision);
      if (event.type === "put") {
        this.#remember({
          key: event.key,
          value: event.value ?? "",
          modRevision: event.modRevision,
          createRevision: event.modRevision,
        });
        continue;
      }
      const known = this.#known.get(event.key);
      this.#known.delete(event.key);
      const run = this.#chain.then(() => this.#onDelete(event.key, event.modRevision, known));
      this.#chain = run.catch((error: unknown) => {
        this.#logger.error({ err: error, key: event.key }, "could not journal a registry expiry");
      });
    }
  }

  async #onDelete(key: string, revision: number, known: KnownNode | undefined): Promise<void> {
    const where = parseRegistryKey(this.#prefix, key);
    if (where === undefined || this.#stopped) return;
    const goneKey = registryGoneKey(this.#prefix, where.upstream, where.id);
    for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
      const marker = await this.#store.get(goneKey);
      const covered = coveredRevision(marker);
      if (covered >= revision) {
        const verdict =
          covered === revision && isDeregistration(marker) ? "deregistered" : "already-journaled";
        this.#tell({ ...where, revision, verdict });
        return;
      }
      const claim: GoneMarker = { reason: "expired", revision };
      const event: HealEventInput = {
        upstream: where.upstream,
        action: "registry_expiry",
        evidence:
          known === undefined
            ? `registered node ${where.id} did not renew its lease`
            : `registered node ${where.id} (${known.address}) did not renew its ${known.ttlSeconds}s lease`,
        source: this.#source,
      };
      if (known !== undefined) event.node = known.address;
      const recorded = await this.#journal.recordGuarded(event, {
        compares: [{ key: goneKey, modRevision: marker?.modRevision ?? 0 }],
        operations: [{ type: "put", key: goneKey, value: JSON.stringify(claim) }],
      });
      if (recorded !== undefined) {
        this.#logger.info(
          { upstream: where.upstream, node: where.id, address: known?.address, revision },
          "registered node expired",
        );
        this.#tell({ ...where, revision, verdict: "expired" });
        return;
      }
    }
    this.#logger.warn(
      { key, revision },
      "gave up journaling a registry expiry: marker kept changing",
    );
  }

  #tell(deletion: RegistryDeletion): void {
    for (const listener of this.#listeners) {
      try {
        listener(deletion);
      } catch (error) {
        this.#logger.error({ err: error }, "registry deletion listener failed");
      }
    }
  }

  #remember(item: KeyValue): void {
    const parsed = parseRegistration(item.value);
    if (!parsed.ok) return;
    const { address, ttlSeconds } = parsed.registration;
    this.#known.set(item.key, { address, ttlSeconds });
  }

  /**
   * A failed watch resumes where it stopped; when that history is gone (compacted), it starts
   * again from a fresh read, and expiries in the gap go unjournaled: the snapshot is still
   * right, only the record of the gap is lost.
   */
  #rewatch(error: Error): void {
    if (this.#stopped) return;
    this.#generation++;
    const old = this.#watch;
    this.#watch = undefined;
    void old?.close().catch(() => undefined);
    const compacted = (error as Error & { code?: string }).code === "CLAWGATE_STORE_COMPACTED";
    this.#logger.warn({ err: error, compacted }, "registry watch failed; watching again");
    this.#retryTimer = setTimeout(() => {
      if (this.#stopped) return;
      const reopen = compacted ? this.start() : this.#openWatch();
      reopen.catch((retryError: unknown) => this.#rewatch(asError(retryError)));
    }, this.#retryMs);
  }
}

function readMarker(marker: KeyValue | undefined): Partial<GoneMarker> | undefined {
  if (marker === undefined) return undefined;
  try {
    return JSON.parse(marker.value) as Partial<GoneMarker>;
  } catch {
    return undefined;
  }
}

function isDeregistration(marker: KeyValue | undefined): boolean {
  return readMarker(marker)?.reason === "deregistered";
}

/** The newest delete revision the marker accounts for; 0 when there is none. */
function coveredRevision(marker: KeyValue | undefined): number {
  const parsed = readMarker(marker);
  if (marker === undefined || parsed === undefined) return 0;
  // A deregistration writes its marker in the commit that deletes the key: same revision.
  if (parsed.reason === "deregistered") return marker.modRevision;
  return typeof parsed.revision === "number" ? parsed.revision : 0;
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
