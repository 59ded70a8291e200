import type { Logger } from "pino";
import type { LeaderElection } from "../election/leader-election.js";
import type { FleetSource } from "../fleet/data-plane-view.js";
import type { SnapshotPublisher } from "../grpc/snapshot-publisher.js";
import type { VersionTargets } from "../grpc/stream-session.js";
import type { ConfigHistory } from "../history/config-history.js";
import { restoreVersion } from "../history/restore-version.js";
import type { ConfigAudit } from "../journal/config-audit.js";
import type { ApplyResult, ConfigService } from "../resources/config-service.js";
import { clawgateError, type Outcome } from "../resources/errors.js";
import type { ConfigModel } from "../snapshot/config-model.js";
import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";
import type { KeyValue, Operation, Store } from "../store/store.js";
import { OneAtATime } from "./one-at-a-time.js";
import type { OutcomeBoard } from "./outcome-board.js";
import { parseStored, rolloutChanged, rolloutInProgress } from "./rollout-fence.js";
import {
  chooseCanaries,
  type RolloutSpec,
  rolloutKey,
  type StoredRollout,
  storedRolloutSchema,
} from "./rollout-state.js";
import { type Counts, judge } from "./rollout-verdict.js";

export interface RolloutControllerOptions {
  store: Store;
  prefix: string;
  config: ConfigService;
  history: ConfigHistory;
  audit?: Pick<ConfigAudit, "rollbackOperations"> | undefined;
  builder: SnapshotPublisher;
  /** This replica's data planes. */
  fleet: FleetSource;
  /** Every replica's data planes and their outcomes: canaries are chosen among all of them. */
  board: OutcomeBoard;
  /**
   * The config model, which sees the rollout key in the same batch as the config committed with
   * it: this replica then pins the rest before it publishes that config. Without it (tests), the
   * key is read every tickMs.
   */
  model?: Pick<ConfigModel, "onChange" | "keyValue"> | undefined;
  /** Only the leader promotes and rolls back on its own. */
  election: Pick<LeaderElection, "isLeader">;
  logger: Pick<Logger, "info" | "warn" | "error">;
  /** How often the store is read again and the canaries judged; default 500 ms. */
  tickMs?: number;
  /**
   * How long a rollback waits for its restored config to be published here before it answers;
   * default 10,000 ms. The rest stay pinned until it is published, however long that takes.
   */
  publishWaitMs?: number;
  clock?: () => number;
}

/** GET /v1/rollout: the stored rollout and how its canaries and the rest are doing. */
export type RolloutView = StoredRollout & {
  outcomes: { canary: Counts; rest: Counts };
};

/** The data planes outside the canaries stay on the base version (see pinned()). */
interface Pin {
  canaries: ReadonlySet<string>;
  /** The base version's snapshot when this process published it; else hold them where they are. */
  base: PublishedSnapshot | undefined;
}

type Ended = Outcome<{ rollout: StoredRollout }>;

/** A baking rollout and its key's mod revision: what a promote or rollback decided on. */
interface Decided {
  rollout: StoredRollout;
  modRevision: number;
}

/**
 * Drives progressive rollouts: an apply with `rollout` goes to the canaries only (the snapshot
 * streams ask pinned() which version each data plane is to serve), the canaries' request
 * outcomes are judged against the rest of the fleet's, and after bakeSeconds the version is
 * promoted to all, unless the canaries fail first: then the config of the base version is
 * restored (a rollback, journaled with the reason) and every data plane gets that.
 *
 * The rollout lives in the store, so every replica pins the same data planes and a restarted
 * or new leader carries on; only the leader judges, promotes and rolls back on its own.
 */
export class RolloutController implements VersionTargets {
  readonly #options: RolloutControllerOptions;
  readonly #key: string;
  readonly #clock: () => number;
  readonly #listeners = new Set<() => void>();
  #stored: { rollout: StoredRollout; modRevision: number } | undefined;
  #pin: Pin | undefined;
  /** The rest's counts on the base version when this process started judging the rollout. */
  #baseline: { id: string; counts: Map<string, Counts> } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #unsubscribeModel: (() => void) | undefined;
  /** Checks and endings, one at a time (a person's promote or abort waits for a check). */
  readonly #turns = new OneAtATime();

  constructor(options: RolloutControllerOptions) {
    this.#options = options;
    this.#key = rolloutKey(options.prefix);
    this.#clock = options.clock ?? Date.now;
  }

  async start(): Promise<void> {
    const { model } = this.#options;
    // Synchronous with the model's batch, so before the snapshot builder's (debounced) rebuild.
    this.#unsubscribeModel = model?.onChange((change) => {
      if (change.rollout || change.replaced) this.#adopt(model.keyValue(this.#key));
    });
    // Its rollback undoes the baking rollout's entry, so no later write may trim it.
    this.#options.history.keep(() => this.baking()?.version);
    await this.#reload();
    this.#timer = setInterval(() => void this.#tick(), this.#options.tickMs ?? 500);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#unsubscribeModel?.();
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

  /** The rollout in progress or the last one, with outcomes; undefined when there was none. */
  view(): RolloutView | undefined {
    const rollout = this.#current();
    if (rollout === undefined) return undefined;
    return { ...rollout, outcomes: this.#outcomes(rollout) };
  }

  /** The rollout baking now, if any. */
  baking(): StoredRollout | undefined {
    const rollout = this.#current();
    return rollout?.state === "baking" ? rollout : undefined;
  }

  /** The 409 every config write gets while a rollout bakes. */
  inProgressError() {
    const rollout = this.baking();
    return rollout === undefined ? undefined : rolloutInProgress(rollout);
  }

  /**
   * Runs `apply` (which must commit `also` with its write) as a rollout: the data planes
   * outside the canaries are pinned to the version published now before anything is written.
   * This replica's view of a baking rollout is only a fast refusal: the write itself is refused
   * in its commit if another rollout started meanwhile (rollout-fence.ts).
   */
  async apply(
    spec: RolloutSpec,
    author: string,
    apply: (also: Operation[]) => Promise<ApplyResult>,
  ): Promise<ApplyResult> {
    const busy = this.inProgressError();
    if (busy !== undefined) return { ok: false, error: busy };
    const base = this.#options.builder.current();
    if (base === undefined) {
      return fail("CLAWGATE_ROLLOUT_REFUSED", "no version is published yet to roll out from");
    }
    // Data planes streaming from any replica, not only this one: a canary on another replica
    // gets the version from there (every replica follows the stored rollout's canaries).
    const connected = [
      ...this.#options.fleet
        .list()
        .filter((dp) => dp.state !== "DISCONNECTED")
        .map((dp) => dp.nodeId),
      ...this.#options.board.nodes(),
    ];
    if (connected.length === 0) {
      return fail("CLAWGATE_ROLLOUT_REFUSED", "no data plane is connected to be a canary");
    }
    // Its rollback undoes every entry newer than the base: refuse now what could not be undone.
    const undoable = await this.#options.history.undoable(base.version);
    if (!undoable.ok) {
      return fail(
        "CLAWGATE_ROLLOUT_REFUSED",
        `a rollout from version ${base.version} could not be rolled back: ${undoable.error.message}`,
      );
    }
    const canaries = chooseCanaries(connected, spec.canary);
    const now = this.#clock();
    const rollout: StoredRollout = {
      state: "baking",
      baseVersion: base.version,
      canaries,
      spec,
      author,
      startedAt: new Date(now).toISOString(),
      bakeUntil: new Date(now + spec.bakeSeconds * 1000).toISOString(),
    };
    // Before the write: the publish it causes must already find the rest pinned.
    const pin: Pin = { canaries: new Set(canaries), base };
    this.#pin = pin;
    const result = await apply([{ type: "put", key: this.#key, value: JSON.stringify(rollout) }]);
    const wrote =
      result.ok && !result.dryRun && result.results.some((r) => r.action !== "unchanged");
    if (!wrote || !result.ok) {
      // Not simply unpinned: the apply that beat this one (here or on another replica) may
      // have started a rollout whose rest must stay pinned, and #adopt saw this pin set then.
      // A pin set since by another apply in flight here is that apply's to settle.
      if (this.#pin === pin) this.#pin = this.#pinFor(this.baking(), base);
      this.#emit();
      return result;
    }
    this.#stored = {
      rollout: { ...rollout, version: result.revision },
      modRevision: result.revision,
    };
    this.#options.logger.info(
      { version: result.revision, baseVersion: base.version, canaries, author },
      "rollout started: the new version goes to the canaries only",
    );
    return result;
  }

  /** Sends the version being baked to every data plane now. */
  promote(author: string): Promise<Ended> {
    return this.#end(async (decided) => this.#promote(decided, `promoted by ${author}`));
  }

  /** Restores the base version's config and sends it to every data plane. */
  abort(author: string): Promise<Ended> {
    return this.#end((decided) => this.#rollBack(decided, `aborted by ${author}`, author));
  }

  #end(step: (decided: Decided) => Promise<Ended>): Promise<Ended> {
    // After a check or ending in progress: one that ended the rollout leaves none baking here.
    return this.#turns.run(async () => {
      await this.#reload();
      const decided = this.#decided();
      if (decided === undefined) {
        return fail("CLAWGATE_NOT_FOUND", "no rollout is baking");
      }
      return await step(decided);
    });
  }

  /** The baking rollout as read now, with the revision an ending must find it at. */
  #decided(): Decided | undefined {
    const rollout = this.baking();
    const modRevision = this.#stored?.modRevision;
    return rollout === undefined || modRevision === undefined
      ? undefined
      : { rollout, modRevision };
  }

  async #promote({ rollout, modRevision }: Decided, reason: string): Promise<Ended> {
    const promoted: StoredRollout = {
      ...rollout,
      state: "promoted",
      finishedAt: new Date(this.#clock()).toISOString(),
      reason,
    };
    const written = await this.#write(promoted, modRevision);
    if (!written.ok) return written;
    this.#options.logger.info(
      { version: rollout.version, reason },
      "rollout promoted to every data plane",
    );
    this.#release();
    return written;
  }

  async #rollBack(
    { rollout, modRevision }: Decided,
    reason: string,
    author: string,
  ): Promise<Ended> {
    const ended: StoredRollout = {
      ...rollout,
      state: "rolled-back",
      finishedAt: new Date(this.#clock()).toISOString(),
      reason,
    };
    const { config, history, audit } = this.#options;
    const result = await restoreVersion({
      config,
      history,
      audit,
      version: rollout.baseVersion,
      rollout: rollout.version ?? Number.NaN,
      author,
      reason,
      also: [{ type: "put", key: this.#key, value: JSON.stringify(ended) }],
      // A promote elsewhere since this decision makes the restore fail rather than undo it.
      endsRollout: modRevision,
    });
    if (!result.ok) {
      this.#options.logger.error(
        { version: rollout.version, baseVersion: rollout.baseVersion, error: result.error.message },
        "rollout could not be rolled back",
      );
      return {
        ok: false,
        error: {
          ...result.error,
          message: `the rollout of version ${rollout.version ?? "?"} could not be rolled back to version ${rollout.baseVersion}: ${result.error.message}`,
        },
      };
    }
    const final = { ...ended, rollbackVersion: result.revision };
    // A restore that changed nothing wrote no state: write it on its own, still conditional on
    // the rollout as decided; one that did wrote the key in its own commit.
    const restored = result.results.some((r) => r.action !== "unchanged");
    const written = await this.#write(final, restored ? result.revision : modRevision);
    if (!written.ok) return written;
    this.#options.logger.warn(
      { version: rollout.version, baseVersion: rollout.baseVersion, reason },
      "rollout rolled back: every data plane gets the base version's config",
    );
    // Unpinned only once the restored config is published, or the rest would be sent the
    // version being rolled back in between.
    await this.#releaseOncePublished(result.revision);
    return written;
  }

  /**
   * Writes the rollout's new state if its key is still at `decidedAt`, the revision the
   * decision was made on: a fresh read here would let a promote on one replica and an abort on
   * another both succeed.
   */
  async #write(rollout: StoredRollout, decidedAt: number): Promise<Ended> {
    const { store } = this.#options;
    const commit = await store.commit(
      [{ key: this.#key, modRevision: decidedAt }],
      [{ type: "put", key: this.#key, value: JSON.stringify(rollout) }],
    );
    if (!commit.succeeded) {
      return { ok: false, error: rolloutChanged(parseStored(await store.get(this.#key))) };
    }
    this.#stored = { rollout, modRevision: commit.revision };
    return { ok: true, rollout };
  }

  /**
   * The rest pinned to a baking rollout's base: a snapshot of that version (the one a failed
   * apply here pinned, or the one published now) if this process has it, else held.
   */
  #pinFor(rollout: StoredRollout | undefined, held?: PublishedSnapshot): Pin | undefined {
    if (rollout === undefined) return undefined;
    const base = [held, this.#options.builder.current()].find(
      (snapshot) => snapshot?.version === rollout.baseVersion,
    );
    return { canaries: new Set(rollout.canaries), base };
  }

  #release(): void {
    this.#pin = undefined;
    this.#baseline = undefined;
    this.#emit();
  }

  #emit(): void {
    for (const listener of this.#listeners) listener();
  }

  /**
   * Releases the pin once `version` (a rollback's) is published here, never before: the rest
   * would otherwise be sent the version rolled back. Resolves then, or after 10 s with the pin
   * still held, so an abort answers even when the publish is late.
   */
  #releaseOncePublished(version: number): Promise<void> {
    const { builder } = this.#options;
    const pin = this.#pin;
    const release = () => {
      if (this.#pin === pin && this.#current()?.state !== "baking") this.#release();
    };
    if ((builder.current()?.version ?? 0) >= version) {
      release();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, this.#options.publishWaitMs ?? 10_000);
      const unsubscribe = builder.onPublish((published) => {
        if (published.version < version) return;
        clearTimeout(timer);
        unsubscribe();
        release();
        resolve();
      });
    });
  }

  #current(): StoredRollout | undefined {
    const stored = this.#stored;
    if (stored === undefined) return undefined;
    // Written with the apply: the key's first mod revision is the version rolled out.
    return { ...stored.rollout, version: stored.rollout.version ?? stored.modRevision };
  }

  /** Reads the rollout from the store: another replica may have started or ended it. */
  async #reload(): Promise<void> {
    this.#adopt(await this.#options.store.get(this.#key));
  }

  /**
   * Takes the stored rollout as it is now. A baking one pins the rest at once (before this
   * replica publishes the version it rolls out); an ended one unpins them, after a rollback only
   * once the restored config is published here, or they would be sent the version rolled back.
   */
  #adopt(kv: KeyValue | undefined): void {
    // A read that started before the model saw a newer write must not undo what that write did.
    if (kv === undefined || kv.modRevision <= (this.#stored?.modRevision ?? 0)) return;
    let parsed: StoredRollout;
    try {
      parsed = storedRolloutSchema.parse(JSON.parse(kv.value));
    } catch (error) {
      this.#options.logger.warn({ err: error }, "stored rollout is unreadable; ignoring it");
      return;
    }
    this.#stored = {
      rollout: {
        ...parsed,
        // A baking rollout is stored with its apply: that commit's revision is its version.
        version: parsed.version ?? kv.modRevision,
        // Ended in the restore's own commit, which is then the version the rollback wrote.
        ...(parsed.state === "rolled-back" && parsed.rollbackVersion === undefined
          ? { rollbackVersion: kv.modRevision }
          : {}),
      },
      modRevision: kv.modRevision,
    };
    if (parsed.state === "baking" && this.#pin === undefined) {
      this.#pin = this.#pinFor(parsed);
      this.#emit();
    } else if (parsed.state !== "baking" && this.#pin !== undefined) {
      if (parsed.state === "rolled-back") void this.#releaseOncePublished(kv.modRevision);
      else this.#release();
    }
  }

  async #tick(): Promise<void> {
    await this.#turns.runUnlessBusy(async () => {
      try {
        await this.#reload();
        const decided = this.#decided();
        if (decided === undefined || !this.#options.election.isLeader()) return;
        const { rollout } = decided;
        const verdict = judge(
          this.#outcomes(rollout).canary,
          this.#outcomes(rollout).rest,
          rollout.spec,
        );
        if (verdict.failing) {
          await this.#rollBack(decided, `canaries failing: ${verdict.reason}`, "rollout");
        } else if (this.#clock() >= Date.parse(rollout.bakeUntil)) {
          await this.#promote(decided, `baked ${rollout.spec.bakeSeconds} s without failing`);
        }
      } catch (error) {
        this.#options.logger.warn({ err: error }, "rollout check failed; trying again");
      }
    });
  }

  /**
   * Canaries on the new version (or any later one: no config is written while it bakes); the
   * rest on the versions before it, since judging began here.
   */
  #outcomes(rollout: StoredRollout): { canary: Counts; rest: Counts } {
    const { board } = this.#options;
    const canaries = new Set(rollout.canaries);
    const version = rollout.version ?? Number.POSITIVE_INFINITY;
    const id = `${rollout.startedAt}/${rollout.baseVersion}`;
    if (this.#baseline?.id !== id) {
      const counts = new Map<string, Counts>();
      for (const node of board.nodes()) {
        if (!canaries.has(node)) counts.set(node, board.of(node, rollout.baseVersion, version));
      }
      this.#baseline = { id, counts };
    }
    const canary = { requests: 0, failures: 0 };
    const rest = { requests: 0, failures: 0 };
    for (const node of board.nodes()) {
      if (canaries.has(node)) {
        const counts = board.of(node, version);
        canary.requests += counts.requests;
        canary.failures += counts.failures;
      } else {
        const now = board.of(node, rollout.baseVersion, version);
        const before = this.#baseline.counts.get(node) ?? { requests: 0, failures: 0 };
        rest.requests += Math.max(0, now.requests - before.requests);
        rest.failures += Math.max(0, now.failures - before.failures);
      }
    }
    return { canary, rest };
  }
}

function fail(code: Parameters<typeof clawgateError>[0], message: string) {
  return { ok: false as const, error: clawgateError(code, message) };
}
