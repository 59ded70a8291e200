import type { CompiledUpstream } from "../compiler/compiled-types.js";
import type { HealthRegistry } from "../health/health-registry.js";
import { type HealthTarget, healthTargets } from "../health/health-targets.js";
import { runInTurns } from "../turns/run-in-turns.js";

/**
 * Upstreams whose health targets are made in the turn of the swap; more (a first snapshot's
 * 2,000) are made over the turns after it. Making the targets of 20,000 nodes was a third of
 * the swap's turn.
 */
export const TARGETS_AT_ONCE_UPSTREAMS = 100;

/** Upstreams whose targets are made between two points where the event loop may run. */
const STEP_UPSTREAMS = 50;

/** What the swap changed, as SnapshotDiff.upstreams gives it (undefined: removed). */
export type ChangedUpstreams = ReadonlyMap<string, CompiledUpstream | undefined>;

/**
 * Hands each swap's changed upstreams to the health registry, in the order of the swaps: a
 * small change at once, a big one after its targets were made over several turns, and a
 * change that follows one still being made waits for it, so the registry never gets an older
 * list after a newer one.
 */
export class HealthSync {
  readonly #health: Pick<HealthRegistry, "syncUpstreams" | "synced">;
  readonly #onError: (err: unknown) => void;
  /** The changes being made and handed over, in order; undefined when none is. */
  #queue: Promise<void> | undefined;

  constructor(
    health: Pick<HealthRegistry, "syncUpstreams" | "synced">,
    onError: (err: unknown) => void,
  ) {
    this.#health = health;
    this.#onError = onError;
  }

  follow(upstreams: ChangedUpstreams): void {
    if (upstreams.size === 0) return;
    if (this.#queue === undefined && upstreams.size <= TARGETS_AT_ONCE_UPSTREAMS) {
      this.#health.syncUpstreams(targetsOf(upstreams.entries()));
      return;
    }
    const queue: Promise<void> = (this.#queue ?? Promise.resolve())
      .then(() => runInTurns(targetsInSteps(upstreams), { laterTurn: true }))
      .then((changes) => changes && this.#health.syncUpstreams(changes))
      .catch(this.#onError)
      .finally(() => {
        if (this.#queue === queue) this.#queue = undefined;
      });
    this.#queue = queue;
  }

  /** Resolves once every change given so far is in the registry and synced there. */
  async synced(): Promise<void> {
    while (this.#queue !== undefined) await this.#queue;
    await this.#health.synced();
  }
}

function targetsOf(
  upstreams: Iterable<[string, CompiledUpstream | undefined]>,
): Map<string, HealthTarget[]> {
  const changes = new Map<string, HealthTarget[]>();
  for (const [name, upstream] of upstreams) {
    changes.set(name, upstream === undefined ? [] : healthTargets([upstream]));
  }
  return changes;
}

function* targetsInSteps(
  upstreams: ChangedUpstreams,
): Generator<void, Map<string, HealthTarget[]>> {
  const changes = new Map<string, HealthTarget[]>();
  let count = 0;
  for (const [name, upstream] of upstreams) {
    changes.set(name, upstream === undefined ? [] : healthTargets([upstream]));
    if (++count % STEP_UPSTREAMS === 0) yield;
  }
  return changes;
}
