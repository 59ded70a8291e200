/**
 * The pin that keeps the data planes outside a rollout's canaries (the rest) on its base
 * version, what the snapshot streams ask (pinned()) before they send a data plane a version,
 * and its release, after a rollback only once the restored config is published here.
 *
 * Why its own unit: the pin must be set before the version rolled out is published and held
 * until the rest may have what is published next; getting either moment wrong sends the rest
 * the version being baked or rolled back.
 */
import type { SnapshotPublisher } from "../grpc/snapshot-publisher.js";
import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";
import type { StoredRollout } from "./rollout-state.js";

/**
 * The data planes outside the canaries stay on the base version (see pinned()): its published
 * snapshot as it was, node lists included. Node registrations and expiries during the bake reach
 * them only when the rollout ends: a snapshot of the base config with today's nodes would be a
 * version of its own, built beside the builder's, which numbers versions by store revision and
 * builds one config only.
 */
export interface Pin {
  canaries: ReadonlySet<string>;
  /** The base version's snapshot when this process published it; else hold them where they are. */
  base: PublishedSnapshot | undefined;
}

export class RestPin {
  readonly #builder: SnapshotPublisher;
  readonly #publishWaitMs: number;
  readonly #listeners = new Set<() => void>();
  #pin: Pin | undefined;

  /** `publishWaitMs`: how long releaseOncePublished waits before it resolves, pin still held. */
  constructor(builder: SnapshotPublisher, publishWaitMs: number) {
    this.#builder = builder;
    this.#publishWaitMs = publishWaitMs;
  }

  pinned(nodeId: string): PublishedSnapshot | "hold" | undefined {
    const pin = this.#pin;
    if (pin === undefined || pin.canaries.has(nodeId)) return undefined;
    return pin.base ?? "hold";
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The pin now; undefined when the rest are free. */
  get current(): Pin | undefined {
    return this.#pin;
  }

  /** Sets (or, with undefined, lifts) the pin; the listeners hear of it at emit(). */
  set(pin: Pin | undefined): void {
    this.#pin = pin;
  }

  emit(): void {
    for (const listener of this.#listeners) listener();
  }

  /**
   * The rest pinned to a baking rollout's base: a snapshot of that version (the one a failed
   * apply here pinned, or the one published now) if this process has it, else held.
   */
  forRollout(rollout: StoredRollout | undefined, held?: PublishedSnapshot): Pin | undefined {
    if (rollout === undefined) return undefined;
    const base = [held, this.#builder.current()].find(
      (snapshot) => snapshot?.version === rollout.baseVersion,
    );
    return { canaries: new Set(rollout.canaries), base };
  }

  /**
   * Calls `release` once `version` (a rollback's) is published here, never before, if the pin
   * is still the one set now: the rest would otherwise be sent the version rolled back.
   * Resolves then, or after publishWaitMs (10 s by default) with the pin still held, so an
   * abort answers even when the publish is late.
   */
  releaseOncePublished(version: number, release: () => void): Promise<void> {
    const builder = this.#builder;
    const pin = this.#pin;
    const releaseSame = () => {
      if (this.#pin === pin) release();
    };
    if ((builder.current()?.version ?? 0) >= version) {
      releaseSame();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, this.#publishWaitMs);
      const unsubscribe = builder.onPublish((published) => {
        if (published.version < version) return;
        clearTimeout(timer);
        unsubscribe();
        releaseSame();
        resolve();
      });
    });
  }
}
