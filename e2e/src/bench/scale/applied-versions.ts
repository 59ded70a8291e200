import type { DataPlane } from "../../support/data-plane-process.js";
import { waitFor } from "../../support/wait-for.js";

/**
 * When each data plane applied each version, from its own "snapshot applied" log line and the
 * time pino stamped on it: what the data plane did, not when a scrape happened to look.
 */
export class AppliedVersions {
  /** Per data plane: version -> Unix ms it was applied. */
  readonly #applied: Map<number, number>[];
  /** Per data plane: version -> how long its apply ran (applyMs of the line), when logged. */
  readonly #applyMs: Map<number, number>[];

  constructor(readonly dataPlanes: readonly DataPlane[]) {
    this.#applyMs = dataPlanes.map(() => new Map<number, number>());
    this.#applied = dataPlanes.map((dp, i) => {
      const byVersion = new Map<number, number>();
      const applyMs = this.#applyMs[i]!;
      dp.process.output.onLine((line) => {
        if (!line.includes('"snapshot applied"')) return;
        try {
          const entry = JSON.parse(line) as { version?: number; time?: number; applyMs?: number };
          if (typeof entry.version === "number" && typeof entry.time === "number") {
            byVersion.set(entry.version, entry.time);
            if (typeof entry.applyMs === "number") applyMs.set(entry.version, entry.applyMs);
          }
        } catch {
          // Not a JSON line after all: nothing to record.
        }
      });
      return byVersion;
    });
  }

  /** How long each data plane's apply of exactly `version` ran, where it logged that. */
  applyMs(version: number): number[] {
    return this.#applyMs.flatMap((byVersion) => {
      const ms = byVersion.get(version);
      return ms === undefined ? [] : [ms];
    });
  }

  /** Resolves with when each data plane applied `version` (or a later one), in order. */
  async waitAll(version: number, timeoutMs: number): Promise<number[]> {
    return waitFor(
      () => {
        const times: number[] = [];
        for (const [i, byVersion] of this.#applied.entries()) {
          this.dataPlanes[i]!.process.assertRunning();
          let at: number | undefined;
          for (const [applied, time] of byVersion) {
            if (applied >= version && (at === undefined || time < at)) at = time;
          }
          if (at === undefined) return false;
          times.push(at);
        }
        return times;
      },
      { what: `every data plane to apply version ${version}`, timeoutMs, intervalMs: 2 },
    );
  }
}
