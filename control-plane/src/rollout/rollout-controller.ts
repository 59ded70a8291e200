import type { Logger } from "pino";
import type { LeaderElection } from "../election/leader-election.js";
import type { FleetSource } from "../fleet/data-plane-view.js";
import type { SnapshotPublisher } from "../grpc/snapshot-publisher.js";
import type { VersionTargets } from "../grpc/stream-session.js";
import type { ConfigHistory } from "../history/config-history.js";
import type { ConfigAudit } from "../journal/config-audit.js";
import type { ApplyResult, ConfigService } from "../resources/config-service.js";
import { clawgateError } from "../resources/errors.js";
import type { ConfigModel } from "../snapshot/config-model.js";
import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";
import type { KeyValue, Operation, Store } from "../store/store.js";
import { OneAtATime } from "./one-at-a-time.js";
import type { OutcomeBoard } from "./outcome-board.js";
import { type Pin, RestPin } from "./rest-pin.js";
import { ledgerId, RolloutEvidence } from "./rollout-evidence.js";
import { rolloutInProgress } from "./rollout-fence.js";
import { planRollout } from "./rollout-plan.js";
import {
  type RolloutSpec,
  rolloutKey,
  type StoredRollout,
  storedRolloutSchema,
} from "./rollout-state.js";
import { type Counts, judge, type Verdict } from "./rollout-verdict.js";
import { type Decided, type Ended, restoreBase, writeIfUndecided } from "./rollout-writes.js";

export interface RolloutControllerOptions {
  store: Store;
  prefix: string;
  config: ConfigService;
  history: ConfigHistory;
  audit?: Pick<ConfigAudit, "rollbackOperations"> | undefined;
  builder: SnapshotPublisher;
  /** Every replica's data planes with their state: canaries are chosen among the SYNCED ones. */
  fleet: FleetSource;
  /** Every replica's data planes' outcomes and NACKs: the canaries are judged on them. */
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
  /**
   * The longest a changed evidence ledger waits for the leader to write it while the verdict
   * holds; default 10,000 ms, the default leaderTtlSeconds (main passes leaderTtlSeconds). A
   * leader that dies is replaced only once its lease has run out, leaderTtlSeconds later, and
   * the new leader's own in-memory ledger has followed every report meanwhile: the stored one
   * only matters for a process that starts judging afresh, and evidence as old as a takeover
   * already is costs it no more than the takeover does. Writing every check instead (twice a
   * second under traffic) was a revision etcd keeps until compaction each time.
   */
  evidenceWriteMs?: number;
  /** Wall clock of bakeUntil, startedAt and the evidence writes' pace; default Date.now. */
  clock?: () => number;
}

/** GET /v1/rollout: the stored rollout and how its canaries and the rest are doing. */
export type RolloutView = StoredRollout & {
  outcomes: { canary: Counts; rest: Counts };
  /** While it bakes: what the leader makes of the outcomes now. */
  verdict?: Verdict;
};

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
  #stored: { rollout: StoredRollout; modRevision: number } | undefined;
  /** The rest pinned to the base while a rollout bakes (see rest-pin.ts). */
  readonly #pin: RestPin;
  /** What the canaries and the rest served since the rollout began (see rollout-evidence.ts). */
  readonly #evidence: RolloutEvidence;
  /** The rollout whose bake time ran out without evidence, logged once. */
  #heldLogged: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #unsubscribeModel: (() => void) | undefined;
  /** Checks and endings, one at a time (a person's promote or abort waits for a check). */
  readonly #turns = new OneAtATime();

  constructor(options: RolloutControllerOptions) {
    this.#options = options;
    this.#key = rolloutKey(options.prefix);
    this.#clock = options.clock ?? Date.now;
    this.#pin = new RestPin(options.builder, options.publishWaitMs ?? 10_000);
    this.#evidence = new RolloutEvidence(
      options.store,
      options.prefix,
      options.board,
      options.evidenceWriteMs ?? 10_000,
    );
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
    this.#timer = setInterval(() => void this.check(), this.#options.tickMs ?? 500);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#unsubscribeModel?.();
  }

  pinned(nodeId: string): PublishedSnapshot | "hold" | undefined {
    return this.#pin.pinned(nodeId);
  }

  onChange(listener: () => void): () => void {
    return this.#pin.onChange(listener);
  }

  /** The rollout in progress or the last one, with outcomes; undefined when there was none. */
  view(): RolloutView | undefined {
    const rollout = this.#current();
    if (rollout === undefined) return undefined;
    if (rollout.state !== "baking") {
      return { ...rollout, outcomes: this.#evidence.outcomes(rollout) };
    }
    const evidence = this.#evidence.of(rollout);
    const { canary, rest } = evidence;
    return { ...rollout, outcomes: { canary, rest }, verdict: judge(evidence, rollout.spec) };
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
   * in its commit if another rollout started meanwhile (rollout-fence.ts). What it refuses
   * before anything is pinned is in rollout-plan.ts.
   */
  async apply(
    spec: RolloutSpec,
    author: string,
    apply: (also: Operation[]) => Promise<ApplyResult>,
  ): Promise<ApplyResult> {
    const busy = this.inProgressError();
    if (busy !== undefined) return { ok: false, error: busy };
    const planned = await planRollout(this.#options, spec, author, this.#clock);
    if (!planned.ok) return planned;
    const { rollout, base } = planned;
    const { canaries } = rollout;
    // Before the write: the publish it causes must already find the rest pinned.
    const pin: Pin = { canaries: new Set(canaries), base };
    this.#pin.set(pin);
    const result = await apply([{ type: "put", key: this.#key, value: JSON.stringify(rollout) }]);
    const wrote =
      result.ok && !result.dryRun && result.results.some((r) => r.action !== "unchanged");
    if (!wrote || !result.ok) {
      // Not simply unpinned: the apply that beat this one (here or on another replica) may
      // have started a rollout whose rest must stay pinned, and #adopt saw this pin set then.
      // A pin set since by another apply in flight here is that apply's to settle.
      if (this.#pin.current === pin) this.#pin.set(this.#pin.forRollout(this.baking(), base));
      this.#pin.emit();
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
    await this.#storeEndingEvidence(rollout);
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

  async #rollBack(decided: Decided, reason: string, author: string): Promise<Ended> {
    const { rollout, modRevision } = decided;
    await this.#storeEndingEvidence(rollout);
    const ended: StoredRollout = {
      ...rollout,
      state: "rolled-back",
      finishedAt: new Date(this.#clock()).toISOString(),
      reason,
    };
    const { config, history, audit, logger } = this.#options;
    const restoreOptions = { config, history, audit, key: this.#key, logger };
    const result = await restoreBase(restoreOptions, decided, ended, author, reason);
    if (!result.ok) return result;
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
   * The evidence an ending is decided on, written before the ending commits, unpaced and on
   * whichever replica ends it (a person's promote or abort may reach any): the last write of
   * the ledger, since every replica stops writing it once it sees the rollout ended.
   */
  async #storeEndingEvidence(rollout: StoredRollout): Promise<void> {
    await this.#evidence.follow(rollout);
    const verdict = judge(this.#evidence.of(rollout), rollout.spec);
    await this.#evidence.store(this.#clock(), verdict.kind, "ending");
  }

  /** Writes the rollout's new state if its key is still at `decidedAt` (see rollout-writes.ts). */
  async #write(rollout: StoredRollout, decidedAt: number): Promise<Ended> {
    const written = await writeIfUndecided(this.#options.store, this.#key, rollout, decidedAt);
    if (!written.ok) return written;
    this.#stored = { rollout, modRevision: written.modRevision };
    return { ok: true, rollout };
  }

  #release(): void {
    this.#evidence.forget();
    this.#pin.set(undefined);
    this.#pin.emit();
  }

  /** Releases the pin once `version` (a rollback's) is published here (see rest-pin.ts). */
  #releaseOncePublished(version: number): Promise<void> {
    return this.#pin.releaseOncePublished(version, () => {
      if (this.#current()?.state !== "baking") this.#release();
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
    if (parsed.state === "baking" && this.#pin.current === undefined) {
      this.#pin.set(this.#pin.forRollout(parsed));
      this.#pin.emit();
    } else if (parsed.state !== "baking" && this.#pin.current !== undefined) {
      if (parsed.state === "rolled-back") void this.#releaseOncePublished(kv.modRevision);
      else this.#release();
    }
  }

  /**
   * One check, as the timer runs it every tickMs: reads the rollout, follows its evidence and,
   * on the leader, writes the evidence when due and promotes or rolls back. Tests call it to
   * step the checks instead of waiting for the timer.
   */
  async check(): Promise<void> {
    await this.#turns.runUnlessBusy(async () => {
      try {
        await this.#reload();
        const decided = this.#decided();
        if (decided === undefined) return;
        const { rollout } = decided;
        await this.#evidence.follow(rollout);
        // Every replica follows the evidence, so a new leader has seen what the canaries served.
        const verdict = judge(this.#evidence.of(rollout), rollout.spec);
        if (!this.#options.election.isLeader()) return;
        await this.#evidence.store(this.#clock(), verdict.kind, "routine");
        const baked = this.#clock() >= Date.parse(rollout.bakeUntil);
        if (verdict.kind === "failing") {
          await this.#rollBack(decided, `canaries failing: ${verdict.reason}`, "rollout");
        } else if (verdict.kind === "passing" && baked) {
          await this.#promote(decided, `baked ${rollout.spec.bakeSeconds} s without failing`);
        } else if (verdict.kind === "inconclusive" && baked) {
          this.#holdWithoutEvidence(rollout, verdict.reason);
        }
      } catch (error) {
        this.#options.logger.warn({ err: error }, "rollout check failed; trying again");
      }
    });
  }

  /**
   * The bake time ran out with too few canary requests to judge: the rollout keeps baking (the
   * rest stay pinned, config writes stay refused) and is promoted only once the canaries served
   * minRequests and pass, or by a person. As an Argo Rollouts analysis that comes back
   * Inconclusive pauses the rollout: no traffic is no evidence that the version is good.
   */
  #holdWithoutEvidence(rollout: StoredRollout, reason: string): void {
    const id = ledgerId(rollout);
    if (this.#heldLogged === id) return;
    this.#heldLogged = id;
    this.#options.logger.warn(
      { version: rollout.version, canaries: rollout.canaries, reason },
      "rollout inconclusive at the end of its bake time: not promoted until the canaries answered minRequests, or promote or abort it",
    );
  }
}

function fail(code: Parameters<typeof clawgateError>[0], message: string) {
  return { ok: false as const, error: clawgateError(code, message) };
}
