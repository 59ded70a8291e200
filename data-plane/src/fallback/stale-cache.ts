import { type Clock, systemClock } from "../clock/clock.js";

/** A successful GET response kept to be served stale while its upstream fails. */
export interface StaleEntry {
  readonly status: number;
  /** Client-facing headers as a flat [name, value, ...] list, without Content-Length or X-Request-Id. */
  readonly headers: readonly string[];
  readonly body: Buffer;
  /** Clock time it was stored, in ms. */
  readonly storedAt: number;
}

export interface StaleCacheOptions {
  /** Most entries kept; default 1000. */
  maxEntries?: number;
  /** Most body bytes kept over all entries; default 64 MiB. */
  maxBytes?: number;
  /** Largest body kept; a longer response streams through uncached. Default 1 MiB. */
  maxEntryBytes?: number;
  /** Time source for ages; default `systemClock`. */
  clock?: Clock;
}

/**
 * The last good response per key (route, host, path and query), bounded in entries and bytes,
 * least recently stored evicted first. Only routes that opt in (fallback.staleIfErrorSeconds)
 * use it, and only to answer when the upstream cannot (seed 000 3.3: reads degrade to the last
 * good copy, writes fail fast).
 */
export class StaleCache {
  readonly maxEntryBytes: number;
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private readonly clock: Clock;
  private readonly entries = new Map<string, StaleEntry>();
  private bytes = 0;

  constructor(options: StaleCacheOptions = {}) {
    this.maxEntries = options.maxEntries ?? 1000;
    this.maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    this.maxEntryBytes = Math.min(options.maxEntryBytes ?? 1024 * 1024, this.maxBytes);
    this.clock = options.clock ?? systemClock;
  }

  /** Stores a response, replacing the key's older one; a body over maxEntryBytes is refused. */
  set(key: string, status: number, headers: readonly string[], body: Buffer): boolean {
    if (body.length > this.maxEntryBytes) return false;
    this.delete(key);
    this.entries.set(key, { status, headers, body, storedAt: this.clock.now() });
    this.bytes += body.length;
    // Map iteration order is insertion order: the first key is the oldest store.
    for (const [oldest, entry] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= entry.body.length;
    }
    return true;
  }

  /** The key's entry if it was stored at most `maxAgeMs` ago; an older one is dropped. */
  get(key: string, maxAgeMs: number): StaleEntry | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (this.clock.now() - entry.storedAt > maxAgeMs) {
      this.delete(key);
      return undefined;
    }
    return entry;
  }

  /** Age of an entry in whole seconds, for the Age header. */
  ageSeconds(entry: StaleEntry): number {
    return Math.max(0, Math.floor((this.clock.now() - entry.storedAt) / 1000));
  }

  get size(): number {
    return this.entries.size;
  }

  get totalBytes(): number {
    return this.bytes;
  }

  private delete(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.bytes -= entry.body.length;
  }
}
