import type { HealEvent } from "../journal/heal-event.js";

/** What the heal journal says about a node's current remediation episode. */
export interface JournaledAttempts {
  /** Attempts journaled since the node was last readmitted. */
  attempts: number;
  /** Epoch milliseconds of the newest of them (its result, or the attempt if none), if any. */
  lastAt: number | undefined;
  /**
   * Epoch milliseconds of the newest attempt when no result follows it: its hook may still be
   * running under the leader that started it (or was, until that leader died).
   */
  unsettledAt?: number;
  /** Epoch milliseconds of the node's newest readmission, if the events read show one. */
  readmittedAt?: number;
}

/** Key of a node in the index journaledEpisodes builds. */
export function episodeKey(upstream: string, address: string): string {
  return `${upstream}\u0000${address}`;
}

/**
 * Reads a node's episode back from the journal (events of its upstream, newest first): the
 * remediation attempts since any data plane last readmitted it. A control plane that restarts
 * forgets its backoff; without this it would restart a still-evicted node again at once on every
 * start of its own, however recently and however often that was already done.
 */
export function journaledAttempts(
  newestFirst: readonly HealEvent[],
  address: string,
): JournaledAttempts {
  const upstream = newestFirst.find((event) => event.node === address)?.upstream ?? "";
  const own = newestFirst.filter((event) => event.node === address);
  return journaledEpisodes(own).get(episodeKey(upstream, address)) ?? emptyEpisode();
}

/**
 * Every node's episode from one read of the journal (newest first), indexed by episodeKey: a
 * new leader with thousands of evicted nodes reads the journal once, not once per node.
 */
export function journaledEpisodes(
  newestFirst: readonly HealEvent[],
): Map<string, JournaledAttempts> {
  const episodes = new Map<string, JournaledAttempts>();
  /** Nodes whose readmission was met: everything older belongs to another episode. */
  const closed = new Set<string>();
  /** Nodes whose newest remediation event was seen (so an older one decides nothing more). */
  const resultSeen = new Set<string>();
  for (const event of newestFirst) {
    if (event.node === undefined) continue;
    const key = episodeKey(event.upstream, event.node);
    if (closed.has(key)) continue;
    let episode = episodes.get(key);
    if (episode === undefined) {
      episode = emptyEpisode();
      episodes.set(key, episode);
    }
    const at = Date.parse(event.time);
    if (event.action === "readmit") {
      // The node came back after everything older: that was another episode.
      episode.readmittedAt = at;
      closed.add(key);
      continue;
    }
    if (event.action !== "remediation_attempt" && event.action !== "remediation_result") continue;
    episode.lastAt ??= at;
    if (event.action === "remediation_result") {
      resultSeen.add(key);
      continue;
    }
    episode.attempts++;
    // The newest attempt with no result after it.
    if (!resultSeen.has(key) && episode.attempts === 1) episode.unsettledAt = at;
    resultSeen.add(key);
  }
  return episodes;
}

function emptyEpisode(): JournaledAttempts {
  return { attempts: 0, lastAt: undefined };
}
