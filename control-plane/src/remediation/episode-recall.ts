import type { Logger } from "pino";
import type { Journal } from "../journal/journal.js";
import { backoffDelay } from "./backoff.js";
import type { Episode } from "./episode.js";
import { episodeKey, type JournaledAttempts, journaledEpisodes } from "./journaled-attempts.js";
import type { NodeBackoffs } from "./node-backoffs.js";
import type { RemediationPolicy } from "./remediation-policy.js";
import { DEFAULT_KILL_GRACE_MS } from "./run-command.js";
import type { EpisodeRecords, StoredEpisode } from "./stored-episodes.js";

export interface EpisodeRecallOptions {
  journal: Partial<Pick<Journal, "list">>;
  episodes: EpisodeRecords | undefined;
  /** Where a recalled backoff is kept, so it outlives the episode. */
  backoffs: NodeBackoffs;
  logger: Pick<Logger, "info" | "warn"> | undefined;
}

/**
 * Takes up, once per term of leadership and node, the episode an earlier leader (or an earlier
 * run of this replica) left in the stored episodes and the journal, from one read of each.
 */
export class EpisodeRecall {
  readonly #options: EpisodeRecallOptions;
  /** Nodes whose journaled episode this process has read back in this term of leadership. */
  readonly #recalled = new Set<string>();
  /** This term's one read of the journal and the stored episodes, indexed by node. */
  #index: Promise<Map<string, JournaledAttempts>> | undefined;

  constructor(options: EpisodeRecallOptions) {
    this.#options = options;
  }

  /** Nodes recalled in this term. */
  get size(): number {
    return this.#recalled.size;
  }

  /** A new term: whatever other leaders did meanwhile is in the journal and stored episodes. */
  newTerm(): void {
    this.#recalled.clear();
    this.#index = undefined;
  }

  /** The node's episode is over: a later eviction is not to read it back. */
  forget(key: string): void {
    this.#recalled.delete(key);
    void this.#index?.then((index) => index.delete(key));
  }

  /**
   * Before this term's first attempt on a node, takes up the episode the stored episodes and
   * the journal show (from an earlier run of this replica, or another replica that led before):
   * its attempt count and the backoff after its newest attempt. An attempt with no result may
   * still be running under the leader that started it, so it is given its whole timeout (and
   * the kill grace) before another starts. Unreadable journal: act as if it were empty.
   */
  async recall(episode: Episode, policy: RemediationPolicy): Promise<void> {
    const { upstream, address } = episode;
    const key = episodeKey(upstream, address);
    if (this.#recalled.has(key)) return;
    this.#recalled.add(key);
    this.#index ??= this.#readIndex();
    const past = (await this.#index).get(key);
    if (past === undefined || past.attempts === 0 || past.lastAt === undefined) return;
    episode.attempts = Math.max(episode.attempts, past.attempts);
    let notBefore =
      past.lastAt +
      backoffDelay(past.attempts, { initialMs: policy.backoffMs, maxMs: policy.maxBackoffMs });
    if (past.unsettledAt !== undefined) {
      notBefore = Math.max(notBefore, past.unsettledAt + policy.timeoutMs + DEFAULT_KILL_GRACE_MS);
    }
    episode.notBefore = Math.max(episode.notBefore, notBefore);
    this.#options.backoffs.set(key, episode.notBefore);
    this.#options.logger?.info(
      {
        upstream,
        node: address,
        attempts: episode.attempts,
        notBefore: new Date(episode.notBefore).toISOString(),
      },
      "remediation resumes the episode the journal shows",
    );
  }

  /**
   * One read of the journal and one of the stored episodes for the whole term, indexed by
   * node: a stored episode wins unless the journal shows the node readmitted after it.
   */
  async #readIndex(): Promise<Map<string, JournaledAttempts>> {
    const logger = this.#options.logger;
    let index = new Map<string, JournaledAttempts>();
    const list = this.#options.journal.list?.bind(this.#options.journal);
    if (list !== undefined) {
      try {
        index = journaledEpisodes(await list({ limit: Number.MAX_SAFE_INTEGER }));
      } catch (error) {
        logger?.warn({ err: error }, "cannot read earlier remediation attempts from the journal");
      }
    }
    let stored = new Map<string, StoredEpisode>();
    try {
      stored = (await this.#options.episodes?.readAll()) ?? stored;
    } catch (error) {
      logger?.warn({ err: error }, "cannot read the stored remediation episodes");
    }
    for (const [key, episode] of stored) {
      const journaled = index.get(key);
      const readmittedAt = journaled?.readmittedAt;
      if (readmittedAt !== undefined && readmittedAt > episode.lastAttemptAt) continue;
      if (journaled !== undefined && journaled.attempts >= episode.attempts) continue;
      index.set(key, {
        attempts: episode.attempts,
        lastAt: episode.settledAt ?? episode.lastAttemptAt,
        ...(episode.settledAt === undefined ? { unsettledAt: episode.lastAttemptAt } : {}),
      });
    }
    return index;
  }
}
