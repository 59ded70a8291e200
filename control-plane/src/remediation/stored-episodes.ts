import type { Store } from "../store/store.js";
import { episodeKey } from "./journaled-attempts.js";

/** A node's remediation episode as the leader keeps it, one key per node. */
export interface StoredEpisode {
  upstream: string;
  address: string;
  /** Attempts in the episode so far. */
  attempts: number;
  /** Epoch milliseconds of the newest attempt's start. */
  lastAttemptAt: number;
  /** Epoch milliseconds of its result; absent while (or if never) it finished. */
  settledAt?: number;
}

/**
 * Where the leader keeps each evicted node's episode so the next leader (or the same one after a
 * restart) takes it up. The heal journal alone is not enough: it keeps its newest events only,
 * and a burst of evictions (a rack gone) floods it with the very attempts that would be read
 * back, so a restart would find nothing and start every episode over.
 */
export interface EpisodeRecords {
  /** Every stored episode, indexed by episodeKey, in one read. */
  readAll(): Promise<Map<string, StoredEpisode>>;
  put(episode: StoredEpisode): Promise<void>;
  remove(upstream: string, address: string): Promise<void>;
}

/** `{prefix}meta/remediation/`: under meta/, which the snapshot builder ignores. */
export function storedEpisodesPrefix(prefix: string): string {
  return `${prefix}meta/remediation/`;
}

/** Episodes under `{prefix}meta/remediation/{upstream}/{address}` in the config store. */
export function storeEpisodeRecords(store: Store, prefix: string): EpisodeRecords {
  const base = storedEpisodesPrefix(prefix);
  const keyOf = (upstream: string, address: string) => `${base}${upstream}/${address}`;
  return {
    async readAll() {
      const range = await store.range(base);
      const episodes = new Map<string, StoredEpisode>();
      for (const item of range.items) {
        const episode = parseEpisode(item.value);
        if (episode !== undefined) {
          episodes.set(episodeKey(episode.upstream, episode.address), episode);
        }
      }
      return episodes;
    },
    async put(episode) {
      await store.commit(
        [],
        [
          {
            type: "put",
            key: keyOf(episode.upstream, episode.address),
            value: JSON.stringify(episode),
          },
        ],
      );
    },
    async remove(upstream, address) {
      await store.commit([], [{ type: "delete", key: keyOf(upstream, address) }]);
    },
  };
}

function parseEpisode(value: string): StoredEpisode | undefined {
  try {
    const parsed = JSON.parse(value) as Partial<StoredEpisode>;
    if (
      typeof parsed.upstream !== "string" ||
      typeof parsed.address !== "string" ||
      typeof parsed.attempts !== "number" ||
      typeof parsed.lastAttemptAt !== "number"
    ) {
      return undefined;
    }
    return parsed as StoredEpisode;
  } catch {
    // A key someone wrote by hand: not ours to act on.
    return undefined;
  }
}
