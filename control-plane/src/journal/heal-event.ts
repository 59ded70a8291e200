import { resourceName } from "@clawgate/proto";
import { z } from "zod";

/**
 * What the self-healing chain did, as the journal records it. The lists are closed on purpose:
 * `action` and `outcome` become labels of clawgate_heal_actions_total, so a free-form value
 * would grow the metric without bound. Add a value here when a new heal step appears.
 */
export const HEAL_ACTIONS = [
  /** A passive signal (connection refused on a live request) took a node out at once. */
  "quarantine",
  /** Consecutive probe failures evicted a node. */
  "evict",
  /** Consecutive probe successes brought a node back. */
  "readmit",
  /** The CP started a remediation hook (restart a unit, call a webhook). */
  "remediation_attempt",
  /** A remediation hook finished; `outcome` says how. */
  "remediation_result",
  /** A registered node stopped renewing and its lease expired. */
  "registry_expiry",
] as const;
export type HealAction = (typeof HEAL_ACTIONS)[number];

export const HEAL_OUTCOMES = ["ok", "failed", "skipped", "timeout"] as const;
export type HealOutcome = (typeof HEAL_OUTCOMES)[number];

/** Evidence is a short human-readable reason; longer text is cut to this many characters. */
export const MAX_EVIDENCE_CHARS = 2_000;

export const healEventInputSchema = z.strictObject({
  upstream: resourceName,
  /** The node's address (host:port), as metrics name it; absent for upstream-wide actions. */
  node: z.string().min(1).max(255).optional(),
  action: z.enum(HEAL_ACTIONS),
  evidence: z
    .string()
    .transform((text) =>
      text.length > MAX_EVIDENCE_CHARS ? `${text.slice(0, MAX_EVIDENCE_CHARS - 1)}…` : text,
    )
    .optional(),
  outcome: z.enum(HEAL_OUTCOMES).optional(),
  /** Who saw or did it: a data plane's node id, or "control-plane/<instance>". */
  source: z.string().min(1).max(255),
});
export type HealEventInput = z.input<typeof healEventInputSchema>;

/** One journaled heal action. */
export interface HealEvent {
  /** Key suffix under `{prefix}events/`: zero-padded epoch milliseconds, "-", a sequence number. */
  id: string;
  /** ISO time the event was recorded. */
  time: string;
  upstream: string;
  node?: string;
  action: HealAction;
  evidence?: string;
  outcome?: HealOutcome;
  source: string;
  /**
   * Summary events only: how many events of this source and action it stands for (a burst
   * beyond the journal's queue), and a few of their nodes as "upstream/node".
   */
  count?: number;
  sample?: string[];
}

/** The stored form: everything but `id`, which is the key. */
export const storedHealEventSchema = z.object({
  time: z.iso.datetime(),
  upstream: z.string(),
  node: z.string().optional(),
  action: z.enum(HEAL_ACTIONS),
  evidence: z.string().optional(),
  outcome: z.enum(HEAL_OUTCOMES).optional(),
  source: z.string(),
  count: z.number().int().positive().optional(),
  sample: z.array(z.string()).optional(),
});
