import type { Logger } from "pino";
import type { HealEventInput } from "../journal/heal-event.js";
import type { Journal } from "../journal/journal.js";
import type { EpisodeRecords, StoredEpisode } from "./stored-episodes.js";

export interface AttemptRecordsOptions {
  journal: Pick<Journal, "record">;
  episodes: EpisodeRecords | undefined;
  /** Source of the journal events, e.g. "control-plane/cp-1". */
  source: string;
  logger: Pick<Logger, "warn"> | undefined;
}

/**
 * Writes each attempt to the node's stored episode and the heal journal. A write that fails is
 * logged, not thrown: the hook is worth running even when its record cannot be kept.
 */
export class AttemptRecords {
  readonly #options: AttemptRecordsOptions;

  constructor(options: AttemptRecordsOptions) {
    this.#options = options;
  }

  async store(episode: StoredEpisode): Promise<void> {
    try {
      await this.#options.episodes?.put(episode);
    } catch (error) {
      this.#options.logger?.warn(
        { err: error, upstream: episode.upstream, node: episode.address },
        "could not store a remediation episode",
      );
    }
  }

  async journal(event: Omit<HealEventInput, "source">): Promise<void> {
    try {
      await this.#options.journal.record({ ...event, source: this.#options.source });
    } catch (error) {
      this.#options.logger?.warn(
        { err: error, upstream: event.upstream, node: event.node, action: event.action },
        "could not journal a remediation step",
      );
    }
  }
}
