import type { Logger } from "pino";
import { Informer } from "../store/informer.js";
import type { Store } from "../store/store.js";
import { parseQuotaWindowKey, quotaWindowKey, quotaWindowPrefix } from "./quota-window-key.js";
import type { Claim, WindowCounter, WindowKey } from "./window-counter.js";

export interface StoredWindowCounterOptions {
  store: Store;
  /** Key prefix with its trailing slash (e.g. "/clawgate/"); counts go under `{prefix}meta/quota/`. */
  prefix: string;
  logger: Pick<Logger, "debug" | "info" | "warn">;
  /**
   * Part of what is left under the limit one reservation takes; default 4 (a quarter, at least
   * one unit). Smaller blocks strand less with a replica whose data planes go quiet, at the cost
   * of more store writes as the window fills.
   */
  blockDivisor?: number;
  /** Wall clock, for how long a window's count must live; default Date.now. */
  now?: () => number;
}

/** A count outlives its window by this much, so a charge sent just before the end still lands. */
const LINGER_SECONDS = 5;

/** Writes that lost a race with another replica before one gives up. */
const MAX_ATTEMPTS = 16;

/**
 * The fleet's count of each tenant window, shared by the control-plane replicas through the
 * store: one key per window holding the units claimed, changed only by a compare-and-swap
 * transaction on the key's mod revision (a replica that lost the race reads again and retries),
 * so two replicas never both take the same units. Each key is bound to a store lease that
 * expires after its window, so counts clean themselves up. Every replica follows the counts
 * through an informer (a list, then a watch), so a window one replica finds spent is known as
 * spent to all of them.
 */
export class StoredWindowCounter implements WindowCounter {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #logger: StoredWindowCounterOptions["logger"];
  readonly #divisor: number;
  readonly #now: () => number;
  readonly #informer: Informer;
  readonly #listeners = new Set<(key: Omit<WindowKey, "windowMs">, total: number) => void>();
  /** One store lease per window length and window, shared by the tenants' counts of it. */
  readonly #leases = new Map<string, Promise<string>>();

  constructor(options: StoredWindowCounterOptions) {
    this.#store = options.store;
    this.#prefix = options.prefix;
    this.#logger = options.logger;
    this.#divisor = options.blockDivisor ?? 4;
    this.#now = options.now ?? Date.now;
    this.#informer = new Informer({
      store: options.store,
      prefixes: [quotaWindowPrefix(options.prefix)],
      logger: options.logger,
      name: "quota counts",
      onBatch: (batch) => {
        for (const change of batch.changes) {
          if (change.current === undefined) continue;
          const key = parseQuotaWindowKey(this.#prefix, change.key);
          const total = parseTotal(change.current.value);
          if (key === undefined || total === undefined) continue;
          for (const listener of this.#listeners) listener(key, total);
        }
      },
    });
  }

  /** Lists the counts and follows them; resolves once the first list is read. */
  start(): Promise<void> {
    return this.#informer.start();
  }

  stop(): Promise<void> {
    return this.#informer.stop();
  }

  onTotal(listener: (key: Omit<WindowKey, "windowMs">, total: number) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  reserve(key: WindowKey, limit: number): Promise<Claim> {
    return this.#update(key, (total) =>
      total >= limit ? 0 : Math.max(1, Math.ceil((limit - total) / this.#divisor)),
    );
  }

  charge(key: WindowKey, units: number): Promise<Claim> {
    return this.#update(key, (total) => Math.max(-total, units));
  }

  /** Adds what `units` answers for the count read, in a transaction guarded by its revision. */
  async #update(key: WindowKey, units: (total: number) => number): Promise<Claim> {
    const storeKey = quotaWindowKey(this.#prefix, key);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const current = await this.#store.get(storeKey);
      const total = (current === undefined ? 0 : parseTotal(current.value)) ?? 0;
      const added = units(total);
      if (added === 0) return { units: 0, total };
      const lease = await this.#lease(key);
      const written = await this.#store.commit(
        [{ key: storeKey, modRevision: current?.modRevision ?? 0 }],
        [{ type: "put", key: storeKey, value: String(total + added), lease }],
      );
      if (written.succeeded) return { units: added, total: total + added };
      this.#logger.debug({ key: storeKey, attempt }, "another replica wrote the count first");
    }
    throw new Error(
      `could not update the fleet count ${storeKey}: ${MAX_ATTEMPTS} writes in a row lost to other replicas`,
    );
  }

  /** The store lease a window's counts are bound to: it expires a little after the window. */
  #lease(key: WindowKey): Promise<string> {
    const id = `${key.windowMs}:${key.window}`;
    let lease = this.#leases.get(id);
    if (lease === undefined) {
      const endsInMs = (key.window + 1) * key.windowMs - this.#now();
      const ttlSeconds = Math.max(1, Math.ceil(endsInMs / 1000)) + LINGER_SECONDS;
      lease = this.#store.grantLease(ttlSeconds);
      // A failed grant is not kept: the next write asks again.
      lease.catch(() => this.#leases.delete(id));
      // Windows that ended need their lease no more (it expires on its own).
      for (const [other] of this.#leases) {
        const [windowMs, window] = other.split(":").map(Number);
        if (windowMs === key.windowMs && (window ?? 0) < key.window) this.#leases.delete(other);
      }
      this.#leases.set(id, lease);
    }
    return lease;
  }
}

function parseTotal(value: string): number | undefined {
  const total = Number(value);
  return Number.isSafeInteger(total) && total >= 0 ? total : undefined;
}
