import { currentFileStatKey } from "./file-stat-key.js";

/** Starts calling `tick` every `intervalMs`; returns the stop. */
export type PollSchedule = (tick: () => void, intervalMs: number) => () => void;

export interface StableFilePollOptions {
  /** How often every watched file is stat'ed; default 1000 ms. */
  readonly intervalMs?: number;
  /** Default setInterval, unref'd: watching must never keep a stopping process alive. */
  readonly schedule?: PollSchedule;
  /** Default statSync; a test may stat a fake file system. */
  readonly statKey?: (path: string) => string | undefined;
}

const intervalSchedule: PollSchedule = (tick, intervalMs) => {
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
};

interface Watched {
  /** The stat of the file the caller's context was read from; undefined: any is a change. */
  baseline: string | undefined;
  /** What the previous poll saw. */
  lastPolled: string | undefined;
  readonly onChange: (statKey: string) => void;
}

/**
 * Polls TLS files for changes with stat, one timer for every path (not one Node StatWatcher per
 * file), so its work follows the distinct paths watched, not the upstreams naming them.
 *
 * Two rules, each against a real failure:
 * - The baseline is the stat taken when the caller read the file, not the file at the first
 *   poll (fs.watchFile's baseline): a renewal landing between the read and that poll is a change.
 * - A change is reported only once it is stable: two consecutive polls see the same (inode,
 *   mtime, size), differing from the baseline. A file rewritten in place (`cat a b > ca.pem`,
 *   a script writing 150 certificates) is truncated and then written piece by piece; read
 *   between two writes, a CA bundle is still valid PEM with fewer CAs (connections to nodes
 *   signed by the rest fail to verify) and a certificate fails to parse. Any write between
 *   two polls moves the mtime or size, so a file seen unchanged across a whole interval is no
 *   longer being written, unless its writer paused for longer than that mid-file, which no rule
 *   based on stat can tell from a finished file. This costs one poll interval of latency on
 *   every change; a rename over the file (certbot, Kubernetes volumes) is atomic and needs no
 *   wait, but cannot be told from an in-place write by its stat alone.
 *
 * Stats are synchronous: a few hundred local stats are well under a millisecond, and the poll
 * stays deterministic for tests driving it by hand.
 */
export class StableFilePoll {
  readonly #watched = new Map<string, Watched>();
  readonly #intervalMs: number;
  readonly #schedule: PollSchedule;
  readonly #statKey: (path: string) => string | undefined;
  #stop: (() => void) | undefined;

  constructor(options: StableFilePollOptions = {}) {
    this.#intervalMs = options.intervalMs ?? 1_000;
    this.#schedule = options.schedule ?? intervalSchedule;
    this.#statKey = options.statKey ?? currentFileStatKey;
  }

  /**
   * Watches `path`, calling `onChange` with its stat key when it settles on a stat other than
   * `baseline`, which then becomes the baseline. Watching a path again replaces its watch.
   */
  watch(path: string, baseline: string | undefined, onChange: (statKey: string) => void): void {
    this.#watched.set(path, { baseline, lastPolled: undefined, onChange });
    this.#stop ??= this.#schedule(() => this.poll(), this.#intervalMs);
  }

  /** The caller read the file again (its context now comes from `baseline`). */
  rebase(path: string, baseline: string | undefined): void {
    const watched = this.#watched.get(path);
    if (watched !== undefined) watched.baseline = baseline;
  }

  unwatch(path: string): void {
    this.#watched.delete(path);
    if (this.#watched.size === 0) this.#stopTimer();
  }

  /** Paths watched now. */
  paths(): string[] {
    return [...this.#watched.keys()];
  }

  /** One round: stats each watched path once. The timer calls it; tests may call it directly. */
  poll(): void {
    for (const [path, watched] of this.#watched) {
      const now = this.#statKey(path);
      const stable = now !== undefined && now === watched.lastPolled;
      watched.lastPolled = now;
      // Gone (mid-rename, or deleted): nothing to read yet; the file's return is a change.
      if (!stable || now === watched.baseline) continue;
      watched.baseline = now;
      watched.onChange(now);
    }
  }

  close(): void {
    this.#watched.clear();
    this.#stopTimer();
  }

  #stopTimer(): void {
    this.#stop?.();
    this.#stop = undefined;
  }
}
