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
import { add, EvidenceLedger, since } from "./evidence-ledger.js";
import { OneAtATime } from "./one-at-a-time.js";
import type { OutcomeBoard } from "./outcome-board.js";
import { parseStored, rolloutChanged, rolloutInProgress } from "./rollout-fence.js";
import {
  canaryCandidates,
  chooseCanaries,
  type RolloutSpec,
  rolloutKey,
  type StoredRollout,
  storedRolloutSchema,
} from "./rollout-state.js";
import { type Counts, type Evidence, judge, type Verdict } from "./rollout-verdict.js";

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
  clock?: () => number;
}

/** GET /v1/rollout: the stored rollout and how its canaries and the rest are doing. */
export type RolloutView = StoredRollout & {
  outcomes: { canary: Counts; rest: Counts };
  /** While it bakes: what the leader makes of the outcomes now. */
  verdict?: Verdict;
};

/**
 * The data planes outside the canaries stay on the base version (see pinned()): its published
 * snapshot as it was, node lists included. Node registrations and expiries during the bake reach
 * them only when the rollout ends: a snapshot of the base config with today's nodes would be a
 * version of its own, built beside the builder's, which numbers versions by store revision and
 * builds one config only.
 */
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
  /** What the canaries and the rest served since the rollout began (see #evidence()). */
  #ledger: EvidenceLedger | undefined;
  /** The rollout whose stored ledger this process read (once, when it first judges it). */
  #ledgerLoaded: string | undefined;
  /** The ledger as this process last stored it (the leader stores it). */
  #ledgerStored: string | undefined;
  /** The rollout whose bake time ran out without evidence, logged once. */
  #heldLogged: string | undefined;
  readonly #evidenceKey: string;
  #timer: NodeJS.Timeout | undefined;
  #unsubscribeModel: (() => void) | undefined;
  /** Checks and endings, one at a time (a person's promote or abort waits for a check). */
  readonly #turns = new OneAtATime();

  constructor(options: RolloutControllerOptions) {
    this.#options = options;
    this.#key = rolloutKey(options.prefix);
    this.#evidenceKey = `${options.prefix}rollout/evidence`;
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
    if (rollout.state !== "baking") return { ...rollout, outcomes: this.#outcomes(rollout) };
    const evidence = this.#evidence(rollout);
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
    const candidates = canaryCandidates(this.#options.fleet.list());
    if (candidates.length === 0) {
      return fail(
        "CLAWGATE_ROLLOUT_REFUSED",
        "no connected data plane serves the published version (SYNCED) to be a canary",
      );
    }
    const canaries = chooseCanaries(candidates, spec.canary);
    const { board } = this.#options;
    const baseline: Record<string, Counts> = {};
    for (const node of board.nodes()) {
      if (!canaries.includes(node)) baseline[node] = board.of(node, base.version);
    }
    // Its rollback undoes every entry newer than the base: refuse now what could not be undone.
    const undoable = await this.#options.history.undoable(base.version);
    if (!undoable.ok) {
      return fail(
        "CLAWGATE_ROLLOUT_REFUSED",
        `a rollout from version ${base.version} could not be rolled back: ${undoable.error.message}`,
      );
    }
    const now = this.#clock();
    const rollout: StoredRollout = {
      state: "baking",
      baseVersion: base.version,
      canaries,
      spec,
      author,
      startedAt: new Date(now).toISOString(),
      bakeUntil: new Date(now + spec.bakeSeconds * 1000).toISOString(),
      baseline,
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
    this.#ledger = undefined;
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
        if (decided === undefined) return;
        const { rollout } = decided;
        if (this.#ledgerLoaded !== ledgerId(rollout)) await this.#loadLedger(rollout);
        // Every replica follows the evidence, so a new leader has seen what the canaries served.
        const verdict = judge(this.#evidence(rollout), rollout.spec);
        if (!this.#options.election.isLeader()) return;
        await this.#storeLedger();
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

  /** A restarted process carries on with the evidence the last leader stored. */
  async #loadLedger(rollout: StoredRollout): Promise<void> {
    const id = ledgerId(rollout);
    const stored = await this.#options.store.get(this.#evidenceKey);
    const ledger = EvidenceLedger.parse(stored?.value, id);
    // Else keep what this process saw already (or start one): the next fold brings it up to date.
    if (ledger !== undefined) this.#ledger = ledger;
    this.#ledgerStored = stored?.value;
    this.#ledgerLoaded = id;
  }

  /** Stores the leader's ledger when it changed (at most once a tick). */
  async #storeLedger(): Promise<void> {
    if (this.#ledger === undefined) return;
    const value = JSON.stringify(this.#ledger);
    if (value === this.#ledgerStored) return;
    await this.#options.store.commit([], [{ type: "put", key: this.#evidenceKey, value }]);
    this.#ledgerStored = value;
  }

  /** The outcomes an ended rollout shows: its last evidence if this process followed it. */
  #outcomes(rollout: StoredRollout): { canary: Counts; rest: Counts } {
    const { canary, rest } = this.#evidence(rollout);
    return { canary, rest };
  }

  /**
   * Canaries on the new version (or any later one: no config is written while it bakes), and
   * whether one NACKed it; the rest (the data planes of the stored baseline) on the versions
   * before it, counted from the baseline. Every count goes through the ledger, so a data plane
   * that disconnects or restarts keeps what it served.
   */
  #evidence(rollout: StoredRollout): Evidence {
    const { board } = this.#options;
    const id = ledgerId(rollout);
    if (this.#ledger?.rollout !== id) this.#ledger = new EvidenceLedger(id);
    const ledger = this.#ledger;
    const version = rollout.version ?? Number.POSITIVE_INFINITY;
    const baseline = rollout.baseline ?? {};
    const live = new Set(board.nodes());
    const latest = (node: string, from: number, to?: number) =>
      live.has(node) ? board.of(node, from, to) : undefined;
    let canary: Counts = { requests: 0, failures: 0 };
    let rest: Counts = { requests: 0, failures: 0 };
    for (const node of rollout.canaries) {
      ledger.observe(node, latest(node, version));
      canary = add(canary, ledger.total(node));
    }
    for (const [node, before] of Object.entries(baseline)) {
      ledger.start(node, before);
      ledger.observe(node, latest(node, rollout.baseVersion, version));
      rest = add(rest, since(ledger.total(node), before));
    }
    const refusals = rollout.canaries.flatMap((nodeId) => {
      const refused = board.refused(nodeId, version);
      return refused === undefined ? [] : [{ nodeId, ...refused }];
    });
    return { canary, rest, refusals };
  }
}

/** Tells one rollout's evidence from another's. */
function ledgerId(rollout: StoredRollout): string {
  return `${rollout.startedAt}/${rollout.baseVersion}`;
}

function fail(code: Parameters<typeof clawgateError>[0], message: string) {
  return { ok: false as const, error: clawgateError(code, message) };
}
