/**
 * A RemediationRunner on a fake clock, fake fleet health and an in-memory journal, for the
 * runner's unit tests; its commands answer from a list of outcomes (or a given function).
 */
import { upstreamSchema } from "@clawgate/proto";
import { alwaysLeader, type LeaderElection, LeadershipState } from "../election/leader-election.js";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import { FleetHealth } from "../health/fleet-health.js";
import type { HealEvent, HealEventInput } from "../journal/heal-event.js";
import type { ActionResult } from "./action-result.js";
import { episodeKey } from "./journaled-attempts.js";
import { ManualScheduler } from "./manual-scheduler.js";
import type { RemediationPolicy } from "./remediation-policy.js";
import {
  type RemediationAttemptResult,
  RemediationRunner,
  type RemediationRunnerOptions,
} from "./remediation-runner.js";
import type { RemediationActions } from "./run-hooks.js";
import type { EpisodeRecords, StoredEpisode } from "./stored-episodes.js";

export const NODE = "10.0.0.5:9001";

export function policy(remediation: Record<string, unknown>): RemediationPolicy {
  return upstreamSchema.parse({ remediation }).remediation as RemediationPolicy;
}

export function reports(state: string, address = NODE): ReportedNodeHealth[] {
  return [{ upstream: "agents", address, state, evidence: `probe says ${state}`, changedAtMs: 0 }];
}

/** An election the test flips by hand. */
export function manualElection(): LeaderElection & { set(leader: boolean): void } {
  const state = new LeadershipState();
  return {
    async start() {},
    async stop() {
      state.set(false);
    },
    isLeader: () => state.leader,
    onChange: (listener) => state.onChange(listener),
    set: (leader) => state.set(leader),
  };
}

export function harness(
  options: {
    remediation?: RemediationPolicy | undefined;
    election?: LeaderElection;
    outcomes?: ActionResult["outcome"][];
    /** The stored journal, oldest first: shared by harnesses that stand for one store. */
    history?: HealEvent[];
    /** The fake clock's start; default 1 000 000 ms. */
    start?: number;
    /** Replaces the fake command, which answers from `outcomes` at once. */
    runCommand?: RemediationActions["runCommand"];
    /** More runner options (episodes, maxConcurrent, allow, runningAsRoot). */
    runner?: Partial<RemediationRunnerOptions>;
  } = {},
) {
  const scheduler = new ManualScheduler(options.start ?? 1_000_000);
  const history = options.history ?? [];
  const health = new FleetHealth();
  const journal: HealEventInput[] = [];
  const commands: string[][] = [];
  const outcomes = [...(options.outcomes ?? [])];
  const results: RemediationAttemptResult[] = [];
  /** Journal reads (list calls), to count reads per recall pass. */
  const reads: Array<{ upstream?: string | undefined }> = [];
  let waiter: (() => void) | undefined;
  const election = options.election ?? alwaysLeader();
  // The single-process election leads from start() on.
  if (options.election === undefined) void election.start();
  const runner = new RemediationRunner({
    health,
    policies: {
      remediation: async () =>
        "remediation" in options
          ? options.remediation
          : policy({ command: ["systemctl", "restart", "agent@{port}.service"] }),
    },
    journal: {
      record: async (event) => {
        journal.push(event);
        const stored = {
          ...event,
          id: String(history.length),
          time: new Date(scheduler.now()).toISOString(),
        };
        history.push(stored as HealEvent);
        return stored as HealEvent;
      },
      list: async (query = {}) => {
        reads.push({ upstream: query.upstream });
        return history
          .filter((event) => event.upstream === (query.upstream ?? event.upstream))
          .reverse()
          .slice(0, query.limit ?? 100);
      },
    },
    election,
    source: "control-plane/cp-1",
    scheduler,
    allow: { commands: ["systemctl"], webhookOrigins: [] },
    runningAsRoot: false,
    actions: {
      runCommand: async (argv, runOptions) => {
        commands.push([...argv]);
        if (options.runCommand !== undefined) return options.runCommand(argv, runOptions);
        const outcome = outcomes.shift() ?? "failed";
        return { outcome, evidence: `exit ${outcome === "ok" ? 0 : 1}` };
      },
    },
    ...options.runner,
  });
  runner.onResult((result) => {
    results.push(result);
    waiter?.();
  });
  return {
    scheduler,
    health,
    journal,
    commands,
    results,
    runner,
    election,
    reads,
    history,
    /** Advances the fake clock and waits until `count` attempts in all have finished. */
    async advanceUntilResults(ms: number, count: number) {
      scheduler.advance(ms);
      while (results.length < count) {
        await new Promise<void>((resolve) => {
          waiter = resolve;
        });
      }
    },
    /** Lets pending promise callbacks run, for asserting that nothing happened. */
    async settle() {
      for (let i = 0; i < 20; i++) await Promise.resolve();
    },
  };
}

/** Stored episodes in a map, standing for the store's keys across harnesses (restarts). */
export function memoryEpisodeRecords(): EpisodeRecords & { map: Map<string, StoredEpisode> } {
  const map = new Map<string, StoredEpisode>();
  return {
    map,
    async readAll() {
      return new Map(map);
    },
    async put(episode) {
      map.set(episodeKey(episode.upstream, episode.address), { ...episode });
    },
    async remove(upstream, address) {
      map.delete(episodeKey(upstream, address));
    },
  };
}
