import type { DataPlaneState } from "./data-plane-view.js";

/** What decides a data plane's state, whichever replica it streams from. */
export interface StateFacts {
  connected: boolean;
  appliedVersion: number;
  /** The version this control plane publishes; null before the first publish. */
  published: number | null;
  /** It NACKed the published version (with the software it still runs). */
  refusedPublished: boolean;
  /** Unix milliseconds it fell behind the published version; undefined when not known. */
  behindSince: number | undefined;
  now: number;
  graceMs: number;
}

/**
 * One rule for every data plane the control plane lists, its own and the other replicas' (a
 * version is the store revision, so every replica compares against the same numbers).
 */
export function dataPlaneState(facts: StateFacts): DataPlaneState {
  if (!facts.connected) return "DISCONNECTED";
  // Nothing published yet means there is nothing to lag behind.
  if (facts.published === null || facts.appliedVersion >= facts.published) return "SYNCED";
  if (facts.refusedPublished) return "NACKED";
  const since = facts.behindSince ?? facts.now;
  return facts.now - since < facts.graceMs ? "SYNCING" : "STALE";
}
