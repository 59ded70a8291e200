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
import { HookPool } from "./hook-pool.js";
import { episodeKey, type JournaledAttempts, journaledEpisodes } from "./journaled-attempts.js";
import {
  NOTHING_ALLOWED,
  type RemediationAllowlist,
  refusedRemediation,
} from "./remediation-allowlist.js";
import { DEFAULT_KILL_GRACE_MS, runCommand } from "./run-command.js";
import { realScheduler, type Scheduler } from "./scheduler.js";
import type { EpisodeRecords, StoredEpisode } from "./stored-episodes.js";

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

interface Episode {
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

const nodeKey = episodeKey;

/** Backoff entries kept before a sweep drops those already past (see #sweepBackoffs). */
const BACKOFF_SWEEP_MIN = 1_024;

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
  /** Nodes whose journaled episode this process has read back in this term of leadership. */
  readonly #recalled = new Set<string>();
  /** This term's one read of the journal and the stored episodes, indexed by node. */
  #recallIndex: Promise<Map<string, JournaledAttempts>> | undefined;
  #sweepAt = BACKOFF_SWEEP_MIN;
  /** Aborted when leadership is lost (or the runner stops): running hooks are killed. */
  #term = new AbortController();
  readonly #pool: HookPool;
  readonly #allow: RemediationAllowlist;
  readonly #refusedOnce = new Set<string>();
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
    this.#allow = options.allow ?? NOTHING_ALLOWED;
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
      backoffs: this.#notBefore.size,
      recalled: this.#recalled.size,
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
      this.#recalled.delete(key);
      void this.#recallIndex?.then((index) => index.delete(key));
      if (change.majority === "unreported") {
        // No data plane reports it (deregistered, upstream gone): nothing to pace any more.
        this.#notBefore.delete(key);
      } else {
        this.#sweepBackoffs();
      }
      const episode = this.#episodes.get(key);
      if (episode === undefined) return;
      this.#cancel(episode);
      this.#episodes.delete(key);
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

  /** Drops backoffs already past, once their number has doubled since the last sweep. */
  #sweepBackoffs(): void {
    if (this.#notBefore.size < this.#sweepAt) return;
    const now = this.#scheduler.now();
    for (const [key, notBefore] of this.#notBefore) {
      if (notBefore <= now && !this.#episodes.has(key)) this.#notBefore.delete(key);
    }
    this.#sweepAt = Math.max(BACKOFF_SWEEP_MIN, this.#notBefore.size * 2);
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
    this.#recalled.clear();
    this.#recallIndex = undefined;
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
        busy: false,
        reschedule: false,
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
    if (this.#refused(upstream, policy)) return;
    await this.#recall(episode, policy);
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

  /**
   * Whether the control plane's settings refuse this hook: not on the allowlist (a config
   * stored before the allowlist existed), or a command while running as root. Logged once per
   * upstream and reason, not at every eviction.
   */
  #refused(upstream: string, policy: RemediationPolicy): boolean {
    const refusal = refusedRemediation(policy, this.#allow);
    const asRoot =
      policy.command !== undefined &&
      (this.#options.runningAsRoot ?? process.getuid?.() === 0) &&
      this.#options.allowRoot !== true;
    const reason =
      refusal !== undefined
        ? `${refusal.path}: ${refusal.message}`
        : asRoot
          ? "the control plane runs as root and remediationAllowRoot (CLAWGATE_REMEDIATION_ALLOW_ROOT) is false: run it as an unprivileged user, or allow root"
          : undefined;
    if (reason === undefined) return false;
    const once = `${upstream}\u0000${reason}`;
    if (!this.#refusedOnce.has(once)) {
      this.#refusedOnce.add(once);
      this.#options.logger?.error(
        { upstream, reason },
        "upstream's remediation is refused by the control plane's settings; its evicted nodes are not remediated",
      );
    }
    return true;
  }

  async #attemptNow(episode: Episode, policy: RemediationPolicy, evidence: string): Promise<void> {
    const { upstream, address } = episode;
    const logger = this.#options.logger;
    const signal = this.#term.signal;
    episode.attempts++;
    episode.running = true;
    const attempt = episode.attempts;
    const startedAt = this.#scheduler.now();
    const what = [
      policy.command !== undefined ? `command ${policy.command[0]}` : undefined,
      policy.webhookUrl !== undefined ? "webhook" : undefined,
    ]
      .filter((part) => part !== undefined)
      .join(" and ");
    await this.#store({ upstream, address, attempts: attempt, lastAttemptAt: startedAt });
    await this.#journal({
      upstream,
      node: address,
      action: "remediation_attempt",
      evidence: `attempt ${attempt} of ${policy.maxAttempts}: ${what}; ${evidence}`,
    });

    let result: ActionResult;
    try {
      result = await this.#run(policy, upstream, address, evidence, signal);
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
    this.#notBefore.set(nodeKey(upstream, address), episode.notBefore);
    await this.#store({
      upstream,
      address,
      attempts: attempt,
      lastAttemptAt: startedAt,
      settledAt,
    });
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
    episode.busy = false;
    if (this.#current(episode)) this.#schedule(episode);
  }

  async #run(
    policy: RemediationPolicy,
    upstream: string,
    address: string,
    evidence: string,
    signal: AbortSignal,
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
          signal,
        }),
      );
    }
    if (policy.webhookUrl !== undefined && !signal.aborted) {
      results.push(
        await this.#actions.callWebhook(
          policy.webhookUrl,
          { upstream, node: address, host: values.host, port: Number(values.port), evidence },
          { timeoutMs: policy.timeoutMs, signal },
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
   * Before this term's first attempt on a node, takes up the episode the stored episodes and
   * the journal show (from an earlier run of this replica, or another replica that led before):
   * its attempt count and the backoff after its newest attempt. An attempt with no result may
   * still be running under the leader that started it, so it is given its whole timeout (and
   * the kill grace) before another starts. Unreadable journal: act as if it were empty.
   */
  async #recall(episode: Episode, policy: RemediationPolicy): Promise<void> {
    const { upstream, address } = episode;
    const key = nodeKey(upstream, address);
    if (this.#recalled.has(key)) return;
    this.#recalled.add(key);
    this.#recallIndex ??= this.#readRecallIndex();
    const past = (await this.#recallIndex).get(key);
    if (past === undefined || past.attempts === 0 || past.lastAt === undefined) return;
    episode.attempts = Math.max(episode.attempts, past.attempts);
    let notBefore =
      past.lastAt +
      backoffDelay(past.attempts, { initialMs: policy.backoffMs, maxMs: policy.maxBackoffMs });
    if (past.unsettledAt !== undefined) {
      notBefore = Math.max(notBefore, past.unsettledAt + policy.timeoutMs + DEFAULT_KILL_GRACE_MS);
    }
    episode.notBefore = Math.max(episode.notBefore, notBefore);
    this.#notBefore.set(key, episode.notBefore);
    this.#options.logger?.info(
      {
        upstream,
        node: address,
        attempts: episode.attempts,
        notBefore: new Date(episode.notBefore).toISOString(),
      },
      "remediation resumes the episode the journal shows",
    );
  }

  /**
   * One read of the journal and one of the stored episodes for the whole term, indexed by
   * node: a stored episode wins unless the journal shows the node readmitted after it.
   */
  async #readRecallIndex(): Promise<Map<string, JournaledAttempts>> {
    const logger = this.#options.logger;
    let index = new Map<string, JournaledAttempts>();
    const list = this.#options.journal.list?.bind(this.#options.journal);
    if (list !== undefined) {
      try {
        index = journaledEpisodes(await list({ limit: Number.MAX_SAFE_INTEGER }));
      } catch (error) {
        logger?.warn({ err: error }, "cannot read earlier remediation attempts from the journal");
      }
    }
    let stored = new Map<string, StoredEpisode>();
    try {
      stored = (await this.#options.episodes?.readAll()) ?? stored;
    } catch (error) {
      logger?.warn({ err: error }, "cannot read the stored remediation episodes");
    }
    for (const [key, episode] of stored) {
      const journaled = index.get(key);
      const readmittedAt = journaled?.readmittedAt;
      if (readmittedAt !== undefined && readmittedAt > episode.lastAttemptAt) continue;
      if (journaled !== undefined && journaled.attempts >= episode.attempts) continue;
      index.set(key, {
        attempts: episode.attempts,
        lastAt: episode.settledAt ?? episode.lastAttemptAt,
        ...(episode.settledAt === undefined ? { unsettledAt: episode.lastAttemptAt } : {}),
      });
    }
    return index;
  }

  async #store(episode: StoredEpisode): Promise<void> {
    try {
      await this.#options.episodes?.put(episode);
    } catch (error) {
      this.#options.logger?.warn(
        { err: error, upstream: episode.upstream, node: episode.address },
        "could not store a remediation episode",
      );
    }
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
