import { z } from "zod";
import type { DataPlaneView } from "../fleet/data-plane-view.js";

/** Requests answered and, of them, 5xx (rollout-verdict.ts Counts). */
export const countsSchema = z.object({ requests: z.int().min(0), failures: z.int().min(0) });

/** What POST /v1/apply takes as `rollout`. */
export const rolloutSpecSchema = z.strictObject({
  /** Data planes that get the new version first: a count (3) or a share of the fleet ("10%"). */
  canary: z.union([
    z.int().min(1),
    z.string().regex(/^(100|[1-9][0-9]?)%$/, 'must be a count or a percent from "1%" to "100%"'),
  ]),
  /** How long the canaries serve it before it goes to every data plane; default 300. */
  bakeSeconds: z.int().min(1).max(86_400).default(300),
  /** How much the canaries' 5xx ratio may exceed the rest's before they are rolled back; default 0.05. */
  maxErrorRatio: z.number().min(0).max(1).default(0.05),
  /** Canary requests needed before their ratio is judged; default 20. */
  minRequests: z.int().min(1).max(1_000_000).default(20),
});
export type RolloutSpec = z.infer<typeof rolloutSpecSchema>;

export const ROLLOUT_STATES = ["baking", "promoted", "rolled-back"] as const;
export type RolloutStateName = (typeof ROLLOUT_STATES)[number];

/** The rollout as the store keeps it, so a restart or a new leader resumes it. */
export const storedRolloutSchema = z.object({
  state: z.enum(ROLLOUT_STATES),
  /** The version being rolled out; absent until known (then: the key's first mod revision). */
  version: z.int().optional(),
  /** The version the rest of the fleet stays on, and the one a rollback restores. */
  baseVersion: z.int(),
  /** Node ids of the data planes that get `version` first. */
  canaries: z.array(z.string()),
  spec: rolloutSpecSchema,
  author: z.string(),
  startedAt: z.iso.datetime(),
  bakeUntil: z.iso.datetime(),
  finishedAt: z.iso.datetime().optional(),
  /** Who or what ended it, and why. */
  reason: z.string().optional(),
  /** The version the rollback wrote. */
  rollbackVersion: z.int().optional(),
  /**
   * The rest of the fleet's counts from the base version on when the rollout began, by data
   * plane: the rest's outcomes are counted from these, and only these data planes are the rest
   * (one appearing later, or judged by a new leader, does not add what it served before).
   * Absent from a rollout an older replica started: the rest count nothing then.
   */
  baseline: z.record(z.string(), countsSchema).optional(),
});
export type StoredRollout = z.infer<typeof storedRolloutSchema>;

export function rolloutKey(prefix: string): string {
  return `${prefix}rollout/current`;
}

/**
 * The data planes that may be canaries: those serving the published version (SYNCED), any
 * replica's. One that lags or refused it would judge the new version on no evidence.
 */
export function canaryCandidates(fleet: readonly Pick<DataPlaneView, "nodeId" | "state">[]) {
  return fleet.filter((dp) => dp.state === "SYNCED").map((dp) => dp.nodeId);
}

/**
 * The canaries: the first data planes by node id among those connected, as many as the spec
 * says (a percent rounds up, so "10%" of 3 is 1). Sorting makes the choice predictable: an
 * operator names canary hosts so that they sort first.
 */
export function chooseCanaries(connected: readonly string[], canary: RolloutSpec["canary"]) {
  const sorted = [...new Set(connected)].sort();
  const count =
    typeof canary === "number"
      ? canary
      : Math.ceil((sorted.length * Number(canary.slice(0, -1))) / 100);
  return sorted.slice(0, Math.max(1, count));
}
