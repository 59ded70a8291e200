import { z } from "zod";
import { countsSchema } from "./rollout-state.js";
import type { Counts } from "./rollout-verdict.js";

/**
 * One data plane's counts during a rollout. A data plane reports cumulative counts per process
 * and its record goes when it disconnects, so the latest report alone would drop a canary's
 * evidence to zero on a disconnect or a restart: `banked` keeps what earlier processes served,
 * `last` the latest report of the current one.
 */
const tallySchema = z.object({ banked: countsSchema, last: countsSchema });
type Tally = z.infer<typeof tallySchema>;

const storedLedgerSchema = z.object({
  rollout: z.string(),
  tallies: z.record(z.string(), tallySchema),
});

const ZERO: Counts = { requests: 0, failures: 0 };

/**
 * What each data plane served since a rollout began, kept across its reconnects and restarts.
 * Stored beside the rollout (`{prefix}rollout/evidence`) so a new leader carries it on.
 */
export class EvidenceLedger {
  readonly rollout: string;
  readonly #tallies: Map<string, Tally>;

  constructor(rollout: string, tallies: Record<string, Tally> = {}) {
    this.rollout = rollout;
    this.#tallies = new Map(Object.entries(tallies));
  }

  /** The ledger stored for `rollout`; undefined if the stored one is another's or unreadable. */
  static parse(value: string | undefined, rollout: string): EvidenceLedger | undefined {
    if (value === undefined) return undefined;
    try {
      const stored = storedLedgerSchema.parse(JSON.parse(value));
      return stored.rollout === rollout ? new EvidenceLedger(rollout, stored.tallies) : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Starts `nodeId` from counts it had before the rollout (the rest's baseline), unless it is
   * tallied already.
   */
  start(nodeId: string, counts: Counts): void {
    if (!this.#tallies.has(nodeId)) this.#tallies.set(nodeId, { banked: ZERO, last: counts });
  }

  /**
   * Folds in `nodeId`'s latest cumulative counts; undefined while it has no record
   * (disconnected), which keeps what it served. Counts going down mean a new process counting
   * from zero: what the old one served is banked.
   */
  observe(nodeId: string, latest: Counts | undefined): void {
    const tally = this.#tallies.get(nodeId) ?? { banked: ZERO, last: ZERO };
    if (latest === undefined) {
      this.#tallies.set(nodeId, tally);
      return;
    }
    const restarted =
      latest.requests < tally.last.requests || latest.failures < tally.last.failures;
    this.#tallies.set(nodeId, {
      banked: restarted ? add(tally.banked, tally.last) : tally.banked,
      last: latest,
    });
  }

  /** Everything `nodeId` served, over all its processes; zero when never seen. */
  total(nodeId: string): Counts {
    const tally = this.#tallies.get(nodeId);
    return tally === undefined ? ZERO : add(tally.banked, tally.last);
  }

  toJSON(): z.infer<typeof storedLedgerSchema> {
    return { rollout: this.rollout, tallies: Object.fromEntries(this.#tallies) };
  }
}

export function add(a: Counts, b: Counts): Counts {
  return { requests: a.requests + b.requests, failures: a.failures + b.failures };
}

/** `now - before`, never below zero per field. */
export function since(now: Counts, before: Counts): Counts {
  return {
    requests: Math.max(0, now.requests - before.requests),
    failures: Math.max(0, now.failures - before.failures),
  };
}
