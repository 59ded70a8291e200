import type { HealEvent } from "../journal/heal-event.js";

/** What the heal journal says about a node's current remediation episode. */
export interface JournaledAttempts {
  /** Attempts journaled since the node was last readmitted. */
  attempts: number;
  /** Epoch milliseconds of the newest of them (its result, or the attempt if none), if any. */
  lastAt: number | undefined;
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
  let attempts = 0;
  let lastAt: number | undefined;
  for (const event of newestFirst) {
    if (event.node !== address) continue;
    // The node came back after everything older: that was another episode.
    if (event.action === "readmit") break;
    if (event.action !== "remediation_attempt" && event.action !== "remediation_result") continue;
    lastAt ??= Date.parse(event.time);
    if (event.action === "remediation_attempt") attempts++;
  }
  return { attempts, lastAt };
}
