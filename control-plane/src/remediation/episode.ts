import type { HealOutcome } from "../journal/heal-event.js";

/** A node's remediation episode: from the majority's eviction to its readmission. */
export interface Episode {
  upstream: string;
  address: string;
  attempts: number;
  running: boolean;
  /** From the attempt's timer to its end (reading the policy, waiting for a slot, running). */
  busy: boolean;
  /** Set by the attempt: schedule the next one once it ends. */
  reschedule: boolean;
  lastOutcome: HealOutcome | undefined;
  /** No attempt before this time (backoff). */
  notBefore: number;
  cancelTimer: (() => void) | undefined;
}

/** A fresh episode, paced by the node's backoff from earlier episodes (0 if none). */
export function newEpisode(upstream: string, address: string, notBefore: number): Episode {
  return {
    upstream,
    address,
    attempts: 0,
    running: false,
    busy: false,
    reschedule: false,
    lastOutcome: undefined,
    notBefore,
    cancelTimer: undefined,
  };
}
