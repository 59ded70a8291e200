import type { DataPlane } from "./data-plane-process.js";
import { waitFor } from "./wait-for.js";

/**
 * Reads a data plane's clawgate_snapshot_version back to back until stopped and keeps every
 * value it saw: proof that a version never reached it, which a single later look cannot give.
 */
export class VersionWatch {
  /** Every version read; undefined for a scrape that failed (under load) or came before any. */
  readonly seen = new Set<number | undefined>();
  private watching = true;
  private readonly loop: Promise<void>;

  constructor(private readonly dp: DataPlane) {
    this.loop = (async () => {
      while (this.watching) this.seen.add(await dp.snapshotVersion().catch(() => undefined));
    })();
  }

  /** Waits until a read saw `version` or a later one (default deadline 10 s). */
  async reached(version: number, timeoutMs?: number): Promise<void> {
    await waitFor(() => [...this.seen].some((seen) => seen !== undefined && seen >= version), {
      what: `the watch on ${this.dp.nodeId} to see version ${version}`,
      timeoutMs,
    });
  }

  /** Ends the watch once its read in flight is done; safe to call again. */
  async stop(): Promise<void> {
    this.watching = false;
    await this.loop;
  }
}
