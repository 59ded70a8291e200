import type { Logger } from "pino";
import type { LeaderElection } from "../election/leader-election.js";
import type { FleetHealth, VerdictChange } from "../health/fleet-health.js";
import type { HealOutcome } from "../journal/heal-event.js";
import type { Journal } from "../journal/journal.js";
import type { ActionResult } from "./action-result.js";
import { AttemptRecords } from "./attempt-records.js";
import { backoffDelay } from "./backoff.js";
import { callWebhook } from "./call-webhook.js";
import { type Episode, newEpisode } from "./episode.js";
import { EpisodeRecall } from "./episode-recall.js";
import { evictionEvidence } from "./eviction-evidence.js";
import { HookPool } from "./hook-pool.js";
import { HookRefusals } from "./hook-refusals.js";
import { episodeKey } from "./journaled-attempts.js";
import { NodeBackoffs } from "./node-backoffs.js";
import { NOTHING_ALLOWED, type RemediationAllowlist } from "./remediation-allowlist.js";
import type { RemediationPolicy, RemediationPolicySource } from "./remediation-policy.js";
import { runCommand } from "./run-command.js";
import { hookSummary, type RemediationActions, runHooks } from "./run-hooks.js";
import { realScheduler, type Scheduler } from "./scheduler.js";
import type { EpisodeRecords } from "./stored-episodes.js";

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
  /**
   * Each node's episode in its own key (stored-episodes.ts), so a restart after a burst that
   * flooded the journal still takes episodes up; default none (the journal alone).
   */
  episodes?: EpisodeRecords;
  /** What hooks may run (remediationCommands, remediationWebhookOrigins); default nothing. */
  allow?: RemediationAllowlist;
  /** Run commands even when this process runs as root (remediationAllowRoot); default false. */
  allowRoot?: boolean;
  /** Whether this process runs as root; default from process.getuid(). */
  runningAsRoot?: boolean;
  /** Hooks running at once (remediationMaxConcurrent); default 16. */
  maxConcurrent?: number;
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

/** Nodes the runner keeps bookkeeping for, beyond their episodes (see bookkeeping()). */
export interface RemediationBookkeeping {
  episodes: number;
  backoffs: number;
  recalled: number;
}

/** One finished attempt, told to onResult listeners. */
export interface RemediationAttemptResult extends ActionResult {
  upstream: string;
  address: string;
  attempt: number;
}

const nodeKey = episodeKey;

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
  readonly #backoffs: NodeBackoffs;
  readonly #recall: EpisodeRecall;
  readonly #records: AttemptRecords;
  readonly #refusals: HookRefusals;
  /** Aborted when leadership is lost (or the runner stops): running hooks are killed. */
  #term = new AbortController();
  readonly #pool: HookPool;
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
    this.#pool = new HookPool(options.maxConcurrent ?? 16);
    this.#backoffs = new NodeBackoffs(this.#scheduler);
    this.#recall = new EpisodeRecall({
      journal: options.journal,
      episodes: options.episodes,
      backoffs: this.#backoffs,
      logger: options.logger,
    });
    this.#records = new AttemptRecords({
      journal: options.journal,
      episodes: options.episodes,
      source: options.source,
      logger: options.logger,
    });
    this.#refusals = new HookRefusals({
      allow: options.allow ?? NOTHING_ALLOWED,
      allowRoot: options.allowRoot,
      runningAsRoot: options.runningAsRoot,
      logger: options.logger,
    });
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

  /**
   * Stops scheduling; waits up to `graceMs` (default 5 s) for attempts under way to finish,
   * then kills what still runs (this replica is about to give up leading).
   */
  async stop(graceMs = 5_000): Promise<void> {
    this.#started = false;
    for (const off of this.#unsubscribe.splice(0)) off();
    for (const episode of this.#episodes.values()) this.#cancel(episode);
    if (this.#inFlight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(this.#inFlight),
        new Promise((resolve) => {
          timer = setTimeout(resolve, graceMs);
        }),
      ]);
      clearTimeout(timer);
    }
    this.#term.abort();
  }

  /** How many nodes the runner keeps state for: bounded by the nodes in trouble, not by churn. */
  bookkeeping(): RemediationBookkeeping {
    return {
      episodes: this.#episodes.size,
      backoffs: this.#backoffs.size,
      recalled: this.#recall.size,
    };
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
      // Its journaled episode is over too: a later eviction is not to read it back.
      this.#recall.forget(key);
      if (change.majority === "unreported") {
        // No data plane reports it (deregistered, upstream gone): nothing to pace any more.
        this.#backoffs.delete(key);
      } else {
        this.#backoffs.sweep((node) => this.#episodes.has(node));
      }
      const episode = this.#episodes.get(key);
      if (episode !== undefined) {
        this.#cancel(episode);
        this.#episodes.delete(key);
      }
      // Whether or not this replica knew the episode: a deposed leader's late write, or a key
      // from before this process, would otherwise be read back by the node's next eviction.
      if (this.#options.election.isLeader()) {
        void this.#options.episodes?.remove(change.upstream, change.address).catch((error) => {
          this.#options.logger?.warn(
            { err: error, upstream: change.upstream, node: change.address },
            "could not remove a finished remediation episode",
          );
        });
      }
    }
    // "split" and "quarantined" keep the episode: a pending attempt re-checks the verdict.
  }

  #onLeadership(leader: boolean): void {
    if (!this.#started) return;
    if (!leader) {
      for (const episode of this.#episodes.values()) this.#cancel(episode);
      // A hook still running would run on beside the next leader's: kill it now.
      this.#term.abort();
      return;
    }
    // A new term: whatever other leaders did meanwhile is in the journal and stored episodes.
    this.#term = new AbortController();
    this.#recall.newTerm();
    for (const node of this.#options.health.nodesWhere("evicted")) {
      this.#schedule(this.#episode(node.upstream, node.address));
    }
  }

  #episode(upstream: string, address: string): Episode {
    const key = nodeKey(upstream, address);
    let episode = this.#episodes.get(key);
    if (episode === undefined) {
      episode = newEpisode(upstream, address, this.#backoffs.get(key) ?? 0);
      this.#episodes.set(key, episode);
    }
    return episode;
  }

  #schedule(episode: Episode): void {
    if (!this.#started || !this.#options.election.isLeader()) return;
    if (episode.busy || episode.cancelTimer !== undefined) return;
    const delay = Math.max(0, episode.notBefore - this.#scheduler.now());
    episode.cancelTimer = this.#scheduler.after(delay, () => {
      episode.cancelTimer = undefined;
      episode.busy = true;
      const run = this.#attempt(episode)
        .catch((error: unknown) => {
          this.#options.logger?.error({ err: error }, "remediation attempt failed unexpectedly");
        })
        .finally(() => {
          episode.busy = false;
          // An attempt that stopped short (backoff not over, policy unreadable) comes back.
          if (episode.reschedule && this.#current(episode)) this.#schedule(episode);
          episode.reschedule = false;
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
    if (!this.#leads() || !this.#current(episode)) return;
    const node = this.#options.health.node(upstream, address);
    if (node?.majority !== "evicted") return;
    const logger = this.#options.logger;

    let policy: RemediationPolicy | undefined;
    try {
      policy = await this.#options.policies.remediation(upstream);
    } catch (error) {
      logger?.warn({ err: error, upstream }, "cannot read the upstream's remediation; retrying");
      episode.notBefore = this.#scheduler.now() + 5_000;
      episode.reschedule = true;
      return;
    }
    if (policy === undefined || (policy.command === undefined && policy.webhookUrl === undefined)) {
      return;
    }
    if (this.#refusals.refused(upstream, policy)) return;
    await this.#recall.recall(episode, policy);
    if (episode.attempts >= policy.maxAttempts) {
      logger?.warn(
        { upstream, node: address, attempts: episode.attempts },
        "node stays evicted after every remediation attempt; waiting for it to be readmitted",
      );
      return;
    }
    if (!this.#leads() || !this.#current(episode)) return;
    if (episode.notBefore > this.#scheduler.now()) {
      // The journal holds a recent attempt: wait out its backoff first.
      episode.reschedule = true;
      return;
    }

    // Wait for a slot; the world may have moved on meanwhile, so look again before acting.
    const release = await this.#pool.acquire();
    try {
      if (!this.#leads() || !this.#current(episode)) return;
      if (this.#options.health.node(upstream, address)?.majority !== "evicted") return;
      await this.#attemptNow(episode, policy, evictionEvidence(node));
    } finally {
      release();
    }
  }

  #leads(): boolean {
    return this.#started && this.#options.election.isLeader();
  }

  async #attemptNow(episode: Episode, policy: RemediationPolicy, evidence: string): Promise<void> {
    const { upstream, address } = episode;
    const logger = this.#options.logger;
    const signal = this.#term.signal;
    episode.attempts++;
    episode.running = true;
    const attempt = episode.attempts;
    const startedAt = this.#scheduler.now();
    await this.#records.store({ upstream, address, attempts: attempt, lastAttemptAt: startedAt });
    await this.#records.journal({
      upstream,
      node: address,
      action: "remediation_attempt",
      evidence: `attempt ${attempt} of ${policy.maxAttempts}: ${hookSummary(policy)}; ${evidence}`,
    });

    let result: ActionResult;
    try {
      result = await runHooks(this.#actions, policy, upstream, address, evidence, signal);
    } catch (error) {
      result = {
        outcome: "failed",
        evidence: error instanceof Error ? error.message : String(error),
      };
    }
    episode.running = false;
    episode.lastOutcome = result.outcome;
    const settledAt = this.#scheduler.now();
    episode.notBefore =
      settledAt +
      backoffDelay(attempt, { initialMs: policy.backoffMs, maxMs: policy.maxBackoffMs });
    this.#backoffs.set(nodeKey(upstream, address), episode.notBefore);
    // The hook may have outlived the episode (readmitted, its key deleted) or this term (the next
    // leader keeps the key now): a write then would bring back a finished or newer episode.
    if (this.#leads() && this.#current(episode)) {
      await this.#records.store({
        upstream,
        address,
        attempts: attempt,
        lastAttemptAt: startedAt,
        settledAt,
      });
    }
    await this.#records.journal({
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
    episode.busy = false;
    if (this.#current(episode)) this.#schedule(episode);
  }
}
