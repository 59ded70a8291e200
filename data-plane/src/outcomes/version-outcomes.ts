import type { VersionOutcomeInit } from "../snapshot-client/snapshot-client.js";

/** Versions whose counts are kept and reported: the one served and the few before it. */
export const KEPT_VERSIONS = 3;

/** How often request outcomes per version go to the control plane (when they changed). */
export const OUTCOME_REPORT_INTERVAL_MS = 1_000;

interface Counts {
  requests: number;
  failures: number;
}

/** One version's cumulative counts as plain numbers (a worker sends them over JSON IPC). */
export interface VersionCounts {
  readonly version: number;
  readonly requests: number;
  readonly failures: number;
}

/**
 * Counts answered requests and 5xx answers per config version, for the control plane's
 * progressive rollouts (OutcomeReport on the snapshot stream). A data plane serves one version
 * at a time, so a request counts under the version being served when it is answered; the few
 * requests in flight across a swap count under the new one.
 */
export class VersionOutcomes {
  #version = 0;
  #current: Counts | undefined;
  readonly #byVersion = new Map<number, Counts>();
  #changed = false;

  /** The version now served; counts of older versions are kept for a few more reports. */
  serving(version: number): void {
    if (version === this.#version) return;
    this.#version = version;
    let counts = this.#byVersion.get(version);
    if (counts === undefined) {
      counts = { requests: 0, failures: 0 };
      this.#byVersion.set(version, counts);
    }
    this.#current = counts;
    for (const old of [...this.#byVersion.keys()].sort((a, b) => b - a).slice(KEPT_VERSIONS)) {
      this.#byVersion.delete(old);
    }
    this.#changed = true;
  }

  /** One answered request; 499 (the client left first) says nothing about the config. */
  record(status: number): void {
    const counts = this.#current;
    if (counts === undefined || status === 499) return;
    counts.requests++;
    if (status >= 500) counts.failures++;
    this.#changed = true;
  }

  /** The counts when any changed since the last call, else undefined (nothing to report). */
  takeCounts(): VersionCounts[] | undefined {
    if (!this.#changed) return undefined;
    this.#changed = false;
    return [...this.#byVersion].map(([version, counts]) => ({ version, ...counts }));
  }

  /** As takeCounts, in the shape of the OutcomeReport. */
  takeReport(): VersionOutcomeInit[] | undefined {
    return this.takeCounts()?.map(toReport);
  }
}

/** One version's counts as the snapshot stream's OutcomeReport carries them. */
export function toReport(counts: VersionCounts): VersionOutcomeInit {
  return {
    version: BigInt(counts.version),
    requests: BigInt(counts.requests),
    failures: BigInt(counts.failures),
  };
}
