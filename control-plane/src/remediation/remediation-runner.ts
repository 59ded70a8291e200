import type { UpstreamDocument as Upstream } from "@clawgate/proto";
import type { Logger } from "pino";
import type { LeaderElection } from "../election/leader-election.js";
import type { FleetHealth, NodeHealthSummary, VerdictChange } from "../health/fleet-health.js";
import type { HealEventInput, HealOutcome } from "../journal/heal-event.js";
import type { Journal } from "../journal/journal.js";
import type { ActionResult } from "./action-result.js";
import { backoffDelay } from "./backoff.js";
import { callWebhook } from "./call-webhook.js";
import { expandCommand, templateValues } from "./command-template.js";
import { journaledAttempts } from "./journaled-attempts.js";
import { runCommand } from "./run-command.js";
import { realScheduler, type Scheduler } from "./scheduler.js";

/** An upstream's remediation settings, defaults filled in. */
export type RemediationPolicy = NonNullable<Upstream["remediation"]>;

/** Where the runner reads each upstream's remediation settings at attempt time. */
export interface RemediationPolicySource {
  /** Undefined when the upstream is gone or names no remediation. */
  remediation(upstream: string): Promise<RemediationPolicy | undefined>;
}

/** The actions the runner takes; tests may replace them. */
export interface RemediationActions {
  runCommand: typeof runCommand;
  callWebhook: typeof callWebhook;
}

export interface RemediationRunnerOptions {
  /** Node verdicts: an eviction by the majority starts an episode, a readmission ends it. */
  health: Pick<FleetHealth, "onVerdict" | "nodesWhere" | "node">;
  policies: RemediationPolicySource;
  /**
   * Where attempts are recorded and, with `list`, read back after a restart so the backoff and
   * the attempt budget of an episode already under way still hold.
   */
  journal: Pick<Journal, "record"> & Partial<Pick<Journal, "list">>;
  /** Only the leader runs remediation. */
  election: LeaderElection;
  /** Source of the journal events, e.g. "control-plane/cp-1". */
  source: string;
  logger?: Pick<Logger, "info" | "warn" | "error">;
  /** Clock and timers; default the real ones. */
  scheduler?: Scheduler;
  /** Default the real command runner and webhook caller. */
  actions?: Partial<RemediationActions>;
}

/** Where a node's remediation episode stands, for the admin API. */
export interface RemediationStatus {
  /** Attempts in this episode (since the majority evicted the node). */
  attempts: number;
  running: boolean;
  lastOutcome?: HealOutcome;
  /** ISO time of the next attempt, when one is scheduled. */
  nextAttemptAt?: string;
}

/** One finished attempt, told to onResult listeners. */
export interface RemediationAttemptResult extends ActionResult {
  upstream: string;
  address: string;
  attempt: number;
}

interface Episode {
  upstream: string;
  address: string;
  attempts: number;
  running: boolean;
  lastOutcome: HealOutcome | undefined;
  /** No attempt before this time (backoff). */
  notBefore: number;
  cancelTimer: (() => void) | undefined;
}

function nodeKey(upstream: string, address: string): string {
  return `${upstream}\u0000${address}`;
}

/**
 * Layer 2's last step (seed 000): when most data planes that see a node have evicted it, run
 * the upstream's remediation hook (restart its unit, call a webhook), with backoff between
 * attempts and at most `maxAttempts` per episode; the episode ends when the majority readmits
 * the node. Runs only while this replica leads, and journals every attempt and its result.
 */
export class RemediationRunner {
  readonly #options: RemediationRunnerOptions;
  readonly #scheduler: Scheduler;
  readonly #actions: RemediationActions;
  readonly #episodes = new Map<string, Episode>();
  /** Each node's backoff, kept across episodes so a flapping node is not restarted in a loop. */
  readonly #notBefore = new Map<string, number>();
  /** Nodes whose journaled episode this process has read back (once each). */
  readonly #recalled = new Set<string>();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #listeners = new Set<(result: RemediationAttemptResult) => void>();
  readonly #unsubscribe: Array<() => void> = [];
  #started = false;

  constructor(options: RemediationRunnerOptions) {
    this.#options = options;
    this.#scheduler = options.scheduler ?? realScheduler;
    this.#actions = {
      runCommand: options.actions?.runCommand ?? runCommand,
      callWebhook: options.actions?.callWebhook ?? callWebhook,
    };
  }

  /** Follows verdicts and leadership; picks up nodes already evicted if this replica leads. */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.#unsubscribe.push(
      this.#options.health.onVerdict((change) => this.#onVerdict(change)),
      this.#options.election.onChange((leader) => this.#onLeadership(leader)),
    );
    this.#onLeadership(this.#options.election.isLeader());
  }

  /** Stops scheduling; waits up to `graceMs` (default 5 s) for attempts under way to finish. */
  async stop(graceMs = 5_000): Promise<void> {
    this.#started = false;
    for (const off of this.#unsubscribe.splice(0)) off();
    for (const episode of this.#episodes.values()) this.#cancel(episode);
    if (this.#inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(this.#inFlight),
      new Promise((resolve) => {
        timer = setTimeout(resolve, graceMs);
      }),
    ]);
    clearTimeout(timer);
  }

  /** Calls `listener` after every finished attempt; returns the unsubscribe. */
  onResult(listener: (result: RemediationAttemptResult) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** The node's episode, or undefined when it is not being remediated. */
  status(upstream: string, address: string): RemediationStatus | undefined {
    const episode = this.#episodes.get(nodeKey(upstream, address));
    if (episode === undefined) return undefined;
    const status: RemediationStatus = { attempts: episode.attempts, running: episode.running };
    if (episode.lastOutcome !== undefined) status.lastOutcome = episode.lastOutcome;
    if (episode.cancelTimer !== undefined) {
      status.nextAttemptAt = new Date(
        Math.max(episode.notBefore, this.#scheduler.now()),
      ).toISOString();
    }
    return status;
  }

  #onVerdict(change: VerdictChange): void {
    const key = nodeKey(change.upstream, change.address);
    if (change.majority === "evicted") {
      this.#schedule(this.#episode(change.upstream, change.address));
    } else if (change.majority === "healthy" || change.majority === "unreported") {
      // Readmitted by the majority (or no longer reported at all): the episode is over, and
      // the next eviction starts a new one with a fresh attempt budget.
      const episode = this.#episodes.get(key);
      if (episode === undefined) return;
      this.#cancel(episode);
      this.#episodes.delete(key);
    }
    // "split" and "quarantined" keep the episode: a pending attempt re-checks the verdict.
  }

  #onLeadership(leader: boolean): void {
    if (!this.#started) return;
    if (!leader) {
      for (const episode of this.#episodes.values()) this.#cancel(episode);
      return;
    }
    for (const node of this.#options.health.nodesWhere("evicted")) {
      this.#schedule(this.#episode(node.upstream, node.address));
    }
  }

  #episode(upstream: string, address: string): Episode {
    const key = nodeKey(upstream, address);
    let episode = this.#episodes.get(key);
    if (episode === undefined) {
      episode = {
        upstream,
        address,
        attempts: 0,
        running: false,
        lastOutcome: undefined,
        notBefore: this.#notBefore.get(key) ?? 0,
        cancelTimer: undefined,
      };
      this.#episodes.set(key, episode);
    }
    return episode;
  }

  #schedule(episode: Episode): void {
    if (!this.#started || !this.#options.election.isLeader()) return;
    if (episode.running || episode.cancelTimer !== undefined) return;
    const delay = Math.max(0, episode.notBefore - this.#scheduler.now());
    episode.cancelTimer = this.#scheduler.after(delay, () => {
      episode.cancelTimer = undefined;
      const run = this.#attempt(episode).catch((error: unknown) => {
        this.#options.logger?.error({ err: error }, "remediation attempt failed unexpectedly");
      });
      this.#inFlight.add(run);
      void run.finally(() => this.#inFlight.delete(run));
    });
  }

  #cancel(episode: Episode): void {
    episode.cancelTimer?.();
    episode.cancelTimer = undefined;
  }

  #current(episode: Episode): boolean {
    return this.#episodes.get(nodeKey(episode.upstream, episode.address)) === episode;
  }

  async #attempt(episode: Episode): Promise<void> {
    const { upstream, address } = episode;
    if (!this.#started || !this.#options.election.isLeader() || !this.#current(episode)) return;
    const node = this.#options.health.node(upstream, address);
    if (node?.majority !== "evicted") return;
    const logger = this.#options.logger;

    let policy: RemediationPolicy | undefined;
    try {
      policy = await this.#options.policies.remediation(upstream);
    } catch (error) {
      logger?.warn({ err: error, upstream }, "cannot read the upstream's remediation; retrying");
      episode.notBefore = this.#scheduler.now() + 5_000;
      if (this.#current(episode)) this.#schedule(episode);
      return;
    }
    if (policy === undefined || (policy.command === undefined && policy.webhookUrl === undefined)) {
      return;
    }
    await this.#recall(episode, policy);
    if (episode.attempts >= policy.maxAttempts) {
      logger?.warn(
        { upstream, node: address, attempts: episode.attempts },
        "node stays evicted after every remediation attempt; waiting for it to be readmitted",
      );
      return;
    }
    if (episode.running || !this.#options.election.isLeader() || !this.#current(episode)) return;
    if (episode.notBefore > this.#scheduler.now()) {
      // The journal holds a recent attempt: wait out its backoff first.
      this.#schedule(episode);
      return;
    }

    episode.attempts++;
    episode.running = true;
    const attempt = episode.attempts;
    const evidence = evictionEvidence(node);
    const what = [
      policy.command !== undefined ? `command ${policy.command[0]}` : undefined,
      policy.webhookUrl !== undefined ? "webhook" : undefined,
    ]
      .filter((part) => part !== undefined)
      .join(" and ");
    await this.#journal({
      upstream,
      node: address,
      action: "remediation_attempt",
      evidence: `attempt ${attempt} of ${policy.maxAttempts}: ${what}; ${evidence}`,
    });

    let result: ActionResult;
    try {
      result = await this.#run(policy, upstream, address, evidence);
    } catch (error) {
      result = {
        outcome: "failed",
        evidence: error instanceof Error ? error.message : String(error),
      };
    }
    episode.running = false;
    episode.lastOutcome = result.outcome;
    episode.notBefore =
      this.#scheduler.now() +
      backoffDelay(attempt, { initialMs: policy.backoffMs, maxMs: policy.maxBackoffMs });
    this.#notBefore.set(nodeKey(upstream, address), episode.notBefore);
    await this.#journal({
      upstream,
      node: address,
      action: "remediation_result",
      outcome: result.outcome,
      evidence: result.evidence,
    });
    logger?.info(
      { upstream, node: address, attempt, outcome: result.outcome, evidence: result.evidence },
      "remediation attempt finished",
    );
    for (const listener of this.#listeners) {
      try {
        listener({ upstream, address, attempt, ...result });
      } catch {
        // A listener's failure is no remediation failure.
      }
    }
    // Still evicted after the backoff? Try again; readmission ends the episode first.
    if (this.#current(episode)) this.#schedule(episode);
  }

  async #run(
    policy: RemediationPolicy,
    upstream: string,
    address: string,
    evidence: string,
  ): Promise<ActionResult> {
    const values = templateValues(address);
    const results: ActionResult[] = [];
    if (policy.command !== undefined) {
      results.push(
        await this.#actions.runCommand(expandCommand(policy.command, values), {
          timeoutMs: policy.timeoutMs,
          env: {
            CLAWGATE_REMEDIATION_UPSTREAM: upstream,
            CLAWGATE_REMEDIATION_NODE: address,
          },
        }),
      );
    }
    if (policy.webhookUrl !== undefined) {
      results.push(
        await this.#actions.callWebhook(
          policy.webhookUrl,
          { upstream, node: address, host: values.host, port: Number(values.port), evidence },
          { timeoutMs: policy.timeoutMs },
        ),
      );
    }
    const failed = results.find((result) => result.outcome !== "ok");
    return {
      outcome: failed?.outcome ?? "ok",
      evidence: results.map((result) => result.evidence).join("; "),
    };
  }

  /**
   * Before this process's first attempt on a node, takes up the episode the journal shows (from
   * an earlier run of this replica, or another replica that led before): its attempt count and
   * the backoff after its newest attempt. Unreadable journal: act as if it were empty.
   */
  async #recall(episode: Episode, policy: RemediationPolicy): Promise<void> {
    const { upstream, address } = episode;
    const key = nodeKey(upstream, address);
    const list = this.#options.journal.list?.bind(this.#options.journal);
    if (list === undefined || this.#recalled.has(key)) return;
    this.#recalled.add(key);
    // An attempt made by this process is newer than anything it could read back.
    if (this.#notBefore.has(key)) return;
    let past: ReturnType<typeof journaledAttempts>;
    try {
      past = journaledAttempts(await list({ upstream, limit: 1_000 }), address);
    } catch (error) {
      this.#options.logger?.warn(
        { err: error, upstream, node: address },
        "cannot read earlier remediation attempts from the journal",
      );
      return;
    }
    if (past.attempts === 0 || past.lastAt === undefined) return;
    episode.attempts = Math.max(episode.attempts, past.attempts);
    const notBefore =
      past.lastAt +
      backoffDelay(past.attempts, { initialMs: policy.backoffMs, maxMs: policy.maxBackoffMs });
    episode.notBefore = Math.max(episode.notBefore, notBefore);
    this.#notBefore.set(key, episode.notBefore);
    this.#options.logger?.info(
      {
        upstream,
        node: address,
        attempts: past.attempts,
        notBefore: new Date(episode.notBefore).toISOString(),
      },
      "remediation resumes the episode the journal shows",
    );
  }

  async #journal(event: Omit<HealEventInput, "source">): Promise<void> {
    try {
      await this.#options.journal.record({ ...event, source: this.#options.source });
    } catch (error) {
      this.#options.logger?.warn(
        { err: error, upstream: event.upstream, node: event.node, action: event.action },
        "could not journal a remediation step",
      );
    }
  }
}

/** "evicted by 2 of 3 data planes: <what the first one's probe saw>". */
function evictionEvidence(node: NodeHealthSummary): string {
  const first = node.reports.find((report) => report.state === "evicted" && report.evidence !== "");
  const seen = first === undefined ? "" : `: ${first.evidence}`;
  return `evicted by ${node.evicted} of ${node.total} data planes${seen}`;
}
