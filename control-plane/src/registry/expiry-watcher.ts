import type { Logger } from "pino";
import type { HealEventInput } from "../journal/heal-event.js";
import type { Journal } from "../journal/journal.js";
import { Informer, type InformerBatch } from "../store/informer.js";
import type { KeyValue, Store } from "../store/store.js";
import { coveredRevision, type GoneMarker, isDeregistration } from "./gone-marker.js";
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
  /** First delay before re-reading after the watch fails (backing off to 5 s); default 1000 ms. */
  retryMs?: number;
}

/** How a watcher read one registry key's delete. */
export interface RegistryDeletion {
  upstream: string;
  id: string;
  /**
   * Revision that deleted the key; for a delete seen only by a re-read after the watch failed,
   * the revision of that read, unless a deregistration marker names the exact one.
   */
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
  readonly #informer: Informer;
  readonly #known = new Map<string, KnownNode>();
  readonly #listeners = new Set<DeletionListener>();
  #chain: Promise<unknown> = Promise.resolve();
  #stopped = false;

  constructor(options: RegistryExpiryWatcherOptions) {
    this.#store = options.store;
    this.#prefix = options.prefix;
    this.#journal = options.journal;
    this.#source = options.source;
    this.#logger = options.logger;
    const retryMs = Math.max(options.retryMs ?? 1_000, 1);
    // The shared list-then-watch loop: a compacted or broken watch is relisted, with backoff.
    this.#informer = new Informer({
      store: options.store,
      prefixes: [registryPrefix(options.prefix)],
      name: "registry",
      logger: options.logger,
      retryMinMs: retryMs,
      retryMaxMs: Math.max(retryMs, 5_000),
      onBatch: (batch) => this.#apply(batch),
    });
  }

  /** Reads the registered nodes and starts watching; rejects if that first read fails. */
  start(): Promise<void> {
    return this.#informer.start();
  }

  /** Stops watching and waits for expiries being journaled. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#informer.stop();
    await this.#chain;
  }

  /** Calls `listener` once each registry delete is classified; returns the unsubscribe. */
  onDeletion(listener: DeletionListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  #apply(batch: InformerBatch): void {
    for (const { key, current, previous, revision } of batch.changes) {
      if (current !== undefined) {
        this.#remember(current);
        continue;
      }
      const known = this.#known.get(key);
      this.#known.delete(key);
      // A watch event names the revision of the delete. After a relist (the watch broke or its
      // history was compacted) it is only known to lie after the key's last write and at or
      // before the list: the claim then covers that whole span.
      const after = batch.replaced ? (previous?.modRevision ?? revision - 1) : revision - 1;
      const run = this.#chain.then(() => this.#onDelete(key, { after, revision }, known));
      this.#chain = run.catch((error: unknown) => {
        this.#logger.error({ err: error, key }, "could not journal a registry expiry");
      });
    }
  }

  /** `span`: the key was deleted after revision `after`, at or before `revision`. */
  async #onDelete(
    key: string,
    span: { after: number; revision: number },
    known: KnownNode | undefined,
  ): Promise<void> {
    const { after, revision } = span;
    const where = parseRegistryKey(this.#prefix, key);
    if (where === undefined || this.#stopped) return;
    const goneKey = registryGoneKey(this.#prefix, where.upstream, where.id);
    for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
      const marker = await this.#store.get(goneKey);
      const covered = coveredRevision(marker);
      if (covered > after) {
        // A deregistration's marker is written by the commit that deletes the key.
        const deregistered = covered <= revision && isDeregistration(marker);
        this.#tell({
          ...where,
          revision: deregistered ? covered : revision,
          verdict: deregistered ? "deregistered" : "already-journaled",
        });
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
}
