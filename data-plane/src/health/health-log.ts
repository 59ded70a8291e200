import type { Logger } from "pino";
import type { HealthChange, HealthState } from "./node-health.js";
import { formatEvidence } from "./prober/probe-protocol.js";
import { type Schedule, systemSchedule } from "./schedule.js";

const MESSAGE: Readonly<Record<HealthChange["to"], string>> = {
  healthy: "upstream node back in rotation",
  quarantined: "upstream node quarantined",
  evicted: "upstream node evicted",
};

export interface HealthLogOptions {
  logger: Logger;
  /** Changes logged one line each per window; the rest of the window is summarized. Default 10. */
  linesPerWindow?: number;
  /** Length of a window, from its first change; default 5000 ms. */
  windowMs?: number;
  /** Nodes named in a summary line; default 10. */
  sampleSize?: number;
  /** Timer source; default real, unref'd timers. */
  schedule?: Schedule;
}

interface Summary {
  count: number;
  to: Record<HealthState, number>;
  upstreams: Set<string>;
  sample: string[];
}

/**
 * The log of node health changes. A change is one line with what the probe saw (seed 000
 * section 6: log the TCP time when a node is taken out, so the journal can rebuild the chain of
 * cause and effect); a node leaving rotation is a warning, coming back is info.
 *
 * A burst is aggregated: after `linesPerWindow` lines in a window, further changes are only
 * counted, and one summary line at the window's end gives the counts by new state, how many
 * upstreams they touched and a bounded sample of nodes. A rack of thousands of nodes going away
 * at once is then a handful of lines, not thousands (the per-node detail stays in the metrics and
 * the control plane's journal).
 */
export class HealthLog {
  readonly #logger: Logger;
  readonly #linesPerWindow: number;
  readonly #windowMs: number;
  readonly #sampleSize: number;
  readonly #schedule: Schedule;
  /** Lines written in the current window; undefined while no window is open. */
  #lines: number | undefined;
  #summary: Summary | undefined;
  #cancel: (() => void) | undefined;

  constructor(options: HealthLogOptions) {
    this.#logger = options.logger;
    this.#linesPerWindow = options.linesPerWindow ?? 10;
    this.#windowMs = options.windowMs ?? 5_000;
    this.#sampleSize = options.sampleSize ?? 10;
    this.#schedule = options.schedule ?? systemSchedule;
  }

  change(change: HealthChange): void {
    if (this.#lines === undefined) {
      this.#lines = 0;
      this.#cancel = this.#schedule(() => this.#endWindow(), this.#windowMs);
    }
    if (this.#lines < this.#linesPerWindow) {
      this.#lines += 1;
      logOne(this.#logger, change);
      return;
    }
    if (this.#summary === undefined) {
      this.#summary = {
        count: 0,
        to: { healthy: 0, quarantined: 0, evicted: 0 },
        upstreams: new Set(),
        sample: [],
      };
    }
    const summary = this.#summary;
    summary.count += 1;
    summary.to[change.to] += 1;
    summary.upstreams.add(change.upstream);
    if (summary.sample.length < this.#sampleSize) {
      summary.sample.push(`${change.upstream}/${change.address} ${change.from}->${change.to}`);
    }
  }

  /** Writes the pending summary now and closes the window (at stop). */
  flush(): void {
    this.#cancel?.();
    this.#endWindow();
  }

  #endWindow(): void {
    this.#cancel = undefined;
    this.#lines = undefined;
    const summary = this.#summary;
    this.#summary = undefined;
    if (summary === undefined) return;
    const fields = {
      changes: summary.count,
      ...summary.to,
      upstreams: summary.upstreams.size,
      sample: summary.sample,
      windowMs: this.#windowMs,
    };
    const message = `${summary.count} more upstream node health changes in this burst (summarized)`;
    // Any node leaving rotation makes the burst a warning, as its single lines would be.
    if (summary.to.healthy === summary.count) this.#logger.info(fields, message);
    else this.#logger.warn(fields, message);
  }
}

function logOne(logger: Logger, change: HealthChange): void {
  const { upstream, address, from, to, reason, evidence } = change;
  const fields = {
    upstream,
    node: address,
    from,
    to,
    reason,
    tcpMs: evidence.tcpMs,
    httpStatus: evidence.httpStatus,
    bodyStatus: evidence.bodyStatus,
    error: evidence.error,
    evidence: formatEvidence(evidence),
  };
  if (to === "healthy") logger.info(fields, MESSAGE[to]);
  else logger.warn(fields, MESSAGE[to]);
}
