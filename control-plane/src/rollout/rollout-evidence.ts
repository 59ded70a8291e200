/**
 * What a baking rollout's canaries and the rest served, gathered from the outcome board into
 * the evidence ledger, and the ledger kept in the store beside the rollout.
 *
 * Why its own unit: the verdict (rollout-verdict.ts) is only as good as this evidence, which
 * must survive a data plane's reconnect or restart (the ledger) and a change of leader (the
 * stored ledger), whatever the controller decides with it.
 */
import type { Store } from "../store/store.js";
import { add, EvidenceLedger, since } from "./evidence-ledger.js";
import { EvidencePace } from "./evidence-pace.js";
import type { OutcomeBoard } from "./outcome-board.js";
import type { StoredRollout } from "./rollout-state.js";
import type { Counts, Evidence, Verdict } from "./rollout-verdict.js";

/** Tells one rollout's evidence from another's. */
export function ledgerId(rollout: StoredRollout): string {
  return `${rollout.startedAt}/${rollout.baseVersion}`;
}

export class RolloutEvidence {
  readonly #store: Store;
  readonly #board: OutcomeBoard;
  readonly #evidenceKey: string;
  /** What the canaries and the rest served since the rollout began (see of()). */
  #ledger: EvidenceLedger | undefined;
  /** The rollout whose stored ledger this process read (once, when it first judges it). */
  #ledgerLoaded: string | undefined;
  /** The ledger as this process last stored it (the leader stores it). */
  #ledgerStored: string | undefined;
  /** When a routine check writes the ledger (see evidence-pace.ts). */
  readonly #pace: EvidencePace;

  /** `writeEveryMs`: the longest a changed ledger waits for a routine write. */
  constructor(store: Store, prefix: string, board: OutcomeBoard, writeEveryMs: number) {
    this.#store = store;
    this.#board = board;
    this.#evidenceKey = `${prefix}rollout/evidence`;
    this.#pace = new EvidencePace(writeEveryMs);
  }

  /** Reads the stored ledger of `rollout` the first time this process judges it. */
  async follow(rollout: StoredRollout): Promise<void> {
    if (this.#ledgerLoaded !== ledgerId(rollout)) await this.#load(rollout);
  }

  /** A restarted process carries on with the evidence the last leader stored. */
  async #load(rollout: StoredRollout): Promise<void> {
    const id = ledgerId(rollout);
    const stored = await this.#store.get(this.#evidenceKey);
    const ledger = EvidenceLedger.parse(stored?.value, id);
    // Else keep what this process saw already (or start one): the next fold brings it up to date.
    if (ledger !== undefined) this.#ledger = ledger;
    this.#ledgerStored = stored?.value;
    this.#ledgerLoaded = id;
  }

  /**
   * Stores the ledger when it changed since the last write: at a routine check (`routine`) only
   * when the pace says so (a changed verdict, or writeEveryMs since the last write), before an
   * ending commits (`ending`) always, so the evidence a promote or rollback was decided on is
   * the stored one.
   */
  async store(now: number, verdict: Verdict["kind"], moment: "routine" | "ending"): Promise<void> {
    if (this.#ledger === undefined) return;
    const value = JSON.stringify(this.#ledger);
    if (value === this.#ledgerStored) return;
    if (moment === "routine" && !this.#pace.due(now, verdict)) return;
    await this.#store.commit([], [{ type: "put", key: this.#evidenceKey, value }]);
    this.#ledgerStored = value;
    this.#pace.wrote(now, verdict);
  }

  /** Drops the ledger of a rollout that ended. */
  forget(): void {
    this.#ledger = undefined;
    this.#pace.reset();
  }

  /** The outcomes an ended rollout shows: its last evidence if this process followed it. */
  outcomes(rollout: StoredRollout): { canary: Counts; rest: Counts } {
    const { canary, rest } = this.of(rollout);
    return { canary, rest };
  }

  /**
   * Canaries on the new version (or any later one: no config is written while it bakes), and
   * whether one NACKed it; the rest (the data planes of the stored baseline) on the versions
   * before it, counted from the baseline. Every count goes through the ledger, so a data plane
   * that disconnects or restarts keeps what it served.
   */
  of(rollout: StoredRollout): Evidence {
    const board = this.#board;
    const id = ledgerId(rollout);
    if (this.#ledger?.rollout !== id) {
      this.#ledger = new EvidenceLedger(id);
      this.#pace.reset();
    }
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
